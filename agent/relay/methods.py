"""The CRI v1 method names the relay knows (shared/cri-wire-facts.md).

Known methods get a cached handler and their own metrics label. Any other name is
still relayed (new methods keep appearing upstream), but every unknown name shares
one uncached path and the label `other`: a caller inventing names must not make the
agent's memory, or its /metrics page, grow with each one.
"""

from __future__ import annotations

RUNTIME_SERVICE = "/runtime.v1.RuntimeService/"
IMAGE_SERVICE = "/runtime.v1.ImageService/"

_RUNTIME_UNARY = (
    "Version",
    "RunPodSandbox",
    "StopPodSandbox",
    "RemovePodSandbox",
    "PodSandboxStatus",
    "ListPodSandbox",
    "CreateContainer",
    "StartContainer",
    "StopContainer",
    "RemoveContainer",
    "ListContainers",
    "ContainerStatus",
    "UpdateContainerResources",
    "ReopenContainerLog",
    "ExecSync",
    "Exec",
    "Attach",
    "PortForward",
    "ContainerStats",
    "ListContainerStats",
    "PodSandboxStats",
    "ListPodSandboxStats",
    "UpdateRuntimeConfig",
    "Status",
    "CheckpointContainer",
    "CheckpointPod",
    "RestorePod",
    "ListMetricDescriptors",
    "ListPodSandboxMetrics",
    "RuntimeConfig",
    "UpdatePodSandboxResources",
)
_IMAGE_UNARY = ("ListImages", "ImageStatus", "PullImage", "RemoveImage", "ImageFsInfo")
_RUNTIME_STREAMING = (
    "StreamPodSandboxes",
    "StreamContainers",
    "StreamContainerStats",
    "StreamPodSandboxStats",
    "StreamPodSandboxMetrics",
    "GetContainerEvents",
)
_IMAGE_STREAMING = ("StreamImages",)

# Server-streaming methods. Any other method, known or not, is relayed as unary:
# a new streaming method must be added here.
STREAMING_METHODS = frozenset(
    [RUNTIME_SERVICE + m for m in _RUNTIME_STREAMING]
    + [IMAGE_SERVICE + m for m in _IMAGE_STREAMING]
)
KNOWN_METHODS = frozenset(
    [RUNTIME_SERVICE + m for m in _RUNTIME_UNARY]
    + [IMAGE_SERVICE + m for m in _IMAGE_UNARY]
    + list(STREAMING_METHODS)
)

# Reads a runtime answers from what it holds, in milliseconds, and kubelet repeats
# every second or so. They take the relay's fastest path (a quarter less time per
# relayed call, measured on a busy 2-CPU VM), which cannot be cancelled midway:
# nothing to win, they end about when a cancel would arrive. Every other unary call,
# known or not (ExecSync, PullImage, StopContainer, ...), is cancelled at the
# runtime when its caller goes, freeing its thread at once (server.py).
QUICK_METHODS = frozenset(
    [
        RUNTIME_SERVICE + m
        for m in (
            "Version",
            "Status",
            "RuntimeConfig",
            "PodSandboxStatus",
            "ListPodSandbox",
            "ListContainers",
            "ContainerStatus",
            "ContainerStats",
            "ListContainerStats",
            "PodSandboxStats",
            "ListPodSandboxStats",
            "ListMetricDescriptors",
            "ListPodSandboxMetrics",
        )
    ]
    + [IMAGE_SERVICE + m for m in ("ListImages", "ImageStatus", "ImageFsInfo")]
)
