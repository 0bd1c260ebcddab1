"""NRI's ttrpc service and method names, the events the agent subscribes to, and
the NRI versions it speaks (containerd/nri pkg/api/api.proto)."""

from __future__ import annotations

import re

from proto import nri_pb2

PLUGIN_SERVICE = "nri.pkg.api.v1alpha1.Plugin"
RUNTIME_SERVICE = "nri.pkg.api.v1alpha1.Runtime"

REGISTER_PLUGIN = "RegisterPlugin"
UPDATE_CONTAINERS = "UpdateContainers"

PLUGIN_NAME = "numa-agent"
# The NRI module version this plugin was written against (sent at registration).
PLUGIN_NRI_VERSION = "v0.12.0"

# What the node agent needs: pod lifetime, creation (the cpuset), resize, give-back,
# and PostStartContainer for the started process's pid (the reconcile's kernel check).
SUBSCRIBED = (
    nri_pb2.RUN_POD_SANDBOX,
    nri_pb2.STOP_POD_SANDBOX,
    nri_pb2.REMOVE_POD_SANDBOX,
    nri_pb2.CREATE_CONTAINER,
    nri_pb2.POST_START_CONTAINER,
    nri_pb2.UPDATE_CONTAINER,
    nri_pb2.STOP_CONTAINER,
    nri_pb2.REMOVE_CONTAINER,
)


def event_mask(events: tuple[int, ...] = SUBSCRIBED) -> int:
    """ConfigureResponse.events: bit (event - 1) per event (upstream's EventMask)."""
    mask = 0
    for event in events:
        mask |= 1 << (event - 1)
    return mask


# Versions spoken: v0.3 (containerd 1.7.0, the first with today's protocol) up to,
# not including, v1 (a new major may change the protocol). Runtimes before v0.9
# send no version (empty) and pod/removal events as StateChange: both handled.
MIN_VERSION = (0, 3)
MAX_MAJOR_EXCLUSIVE = 1
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")
UNKNOWN_VERSIONS = frozenset({"", "unknown", "devel"})


class UnsupportedVersion(Exception):
    """The runtime's NRI version is one the agent does not speak."""


def check_version(runtime: str, version: str) -> str:
    """The runtime's NRI version as logged, or UnsupportedVersion saying why not."""
    if version in UNKNOWN_VERSIONS:
        return f"{version or 'unknown'} (assumed compatible)"
    match = _VERSION.match(version)
    if match is None:
        raise UnsupportedVersion(
            f"{runtime} reports NRI version {version!r}, which numa-agent cannot read"
        )
    major, minor = int(match.group(1)), int(match.group(2))
    if (major, minor) < MIN_VERSION or major >= MAX_MAJOR_EXCLUSIVE:
        raise UnsupportedVersion(
            f"{runtime} uses NRI {version}; numa-agent speaks NRI v0.3 to v0.x "
            f"(written against {PLUGIN_NRI_VERSION}): use the CRI proxy (--listen) with this "
            "runtime, or a numa-agent release that speaks its NRI version"
        )
    return version
