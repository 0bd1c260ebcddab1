"""The CRI methods the node agent handles or calls itself (the one place their full
names are spelled, over the relay's service prefix), and decoding their requests."""

from __future__ import annotations

from typing import TypeVar

import grpc
from google.protobuf.message import DecodeError, Message

from agent.relay.hooks import HookAbort
from agent.relay.methods import RUNTIME_SERVICE as _SERVICE

VERSION = _SERVICE + "Version"
RUN_POD_SANDBOX = _SERVICE + "RunPodSandbox"
STOP_POD_SANDBOX = _SERVICE + "StopPodSandbox"
REMOVE_POD_SANDBOX = _SERVICE + "RemovePodSandbox"
LIST_POD_SANDBOX = _SERVICE + "ListPodSandbox"
POD_SANDBOX_STATUS = _SERVICE + "PodSandboxStatus"
CREATE_CONTAINER = _SERVICE + "CreateContainer"
START_CONTAINER = _SERVICE + "StartContainer"
STOP_CONTAINER = _SERVICE + "StopContainer"
REMOVE_CONTAINER = _SERVICE + "RemoveContainer"
UPDATE_CONTAINER_RESOURCES = _SERVICE + "UpdateContainerResources"
LIST_CONTAINERS = _SERVICE + "ListContainers"
CONTAINER_STATUS = _SERVICE + "ContainerStatus"

_M = TypeVar("_M", bound=Message)


def decode(kind: type[_M], request: bytes) -> _M:
    """Parse a hooked request before anything else: garbage is the caller's error
    (INVALID_ARGUMENT), never an exception in the relay."""
    try:
        return kind.FromString(request)
    except DecodeError as err:
        raise HookAbort(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"malformed {kind.DESCRIPTOR.full_name} ({len(request)} bytes): {err}",
        ) from err
