"""The in-memory runtime behind a raw-bytes `forward`, exactly as the relay sees a runtime.

`simulate` and the node-agent tests run the agent's CRI handlers against a
`MemoryRuntime` without gRPC; failures surface as the relay's `BackendError`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc

from agent.relay.backend import BackendError
from agent.relay.endpoint import Endpoint
from agent.relay.hooks import Forward
from agent.relay.methods import IMAGE_SERVICE, RUNTIME_SERVICE
from agent.runtime.memory import IMAGE_METHODS, RUNTIME_METHODS, CallRefused, MemoryRuntime
from proto import cri_pb2

# What BackendError names as the runtime's endpoint when there is no socket.
IN_PROCESS_ENDPOINT = Endpoint(Path("in-process-memory-runtime"))


def _resolve(method: str) -> str:
    """The short rpc name ("Version") of a full CRI method name the runtime implements."""
    for prefix, table in ((RUNTIME_SERVICE, RUNTIME_METHODS), (IMAGE_SERVICE, IMAGE_METHODS)):
        if method.startswith(prefix):
            rpc = method[len(prefix) :]
            if rpc in table:
                return rpc
    raise BackendError(
        method,
        IN_PROCESS_ENDPOINT,
        grpc.StatusCode.UNIMPLEMENTED,
        f"method {method} is not implemented by the in-memory runtime",
    )


def dispatch(runtime: MemoryRuntime, method: str, request: bytes) -> bytes:
    """Parse `request` for the full CRI `method`, call the runtime, serialize the reply.

    Through `runtime.call`, the one way in, so a test runtime sees (records, fails)
    these calls exactly as it sees calls served over gRPC.
    """
    rpc = _resolve(method)
    message: Any = getattr(cri_pb2, f"{rpc}Request").FromString(request)
    try:
        reply: Any = runtime.call(rpc, message)
    except CallRefused as fault:
        raise BackendError(
            method, IN_PROCESS_ENDPOINT, fault.code, fault.details, fault.trailing_metadata
        ) from None
    data: bytes = reply.SerializeToString()
    return data


def in_process_forward(runtime: MemoryRuntime, method: str) -> Forward:
    """The `forward` a hook on `method` gets when the runtime is `runtime` itself."""

    def forward(request: bytes) -> bytes:
        return dispatch(runtime, method, request)

    return forward
