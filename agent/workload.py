"""What the agent knows about pods and containers, as typed values.

Built once from CRI requests (or a `simulate` scenario) at the edge; affinity
evaluation and placement read these and never look at raw CRI messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class QoSClass(StrEnum):
    GUARANTEED = "Guaranteed"
    BURSTABLE = "Burstable"
    BESTEFFORT = "BestEffort"


@dataclass(frozen=True, slots=True)
class PodInfo:
    """A pod sandbox. `uid` is the Kubernetes pod UID (the identity affinity
    scopes use); `id` is the runtime's sandbox id."""

    uid: str
    name: str
    namespace: str
    qosclass: QoSClass
    id: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    cgroup_parent: str = ""


@dataclass(frozen=True, slots=True)
class ContainerInfo:
    """A container of a pod: identity and the labels affinity rules match on.

    `labels` are the container's CRI labels (kubelet's io.kubernetes.* keys);
    `tags` are its CRI annotations. `id` is empty until the runtime created it.
    """

    name: str
    pod: PodInfo
    id: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)

    @property
    def namespace(self) -> str:
        return self.pod.namespace

    @property
    def qosclass(self) -> QoSClass:
        return self.pod.qosclass

    @property
    def who(self) -> str:
        """How messages name it: `container 'web' of pod shop/web-0`."""
        return f"container {self.name!r} of pod {self.pod.namespace}/{self.pod.name}"
