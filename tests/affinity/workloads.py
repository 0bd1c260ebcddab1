"""Small builders for the pods and containers the affinity tests reason about."""

from __future__ import annotations

from agent.workload import ContainerInfo, PodInfo, QoSClass

NAME_LABEL = "io.kubernetes.container.name"


def pod(
    name: str = "web-0",
    *,
    uid: str | None = None,
    namespace: str = "shop",
    qosclass: QoSClass = QoSClass.BURSTABLE,
    sandbox_id: str = "",
    labels: dict[str, str] | None = None,
) -> PodInfo:
    return PodInfo(
        uid=uid if uid is not None else f"uid-{name}",
        name=name,
        namespace=namespace,
        qosclass=qosclass,
        id=sandbox_id,
        labels=labels or {},
    )


def container(
    name: str,
    of: PodInfo,
    *,
    cid: str = "",
    labels: dict[str, str] | None = None,
    tags: dict[str, str] | None = None,
) -> ContainerInfo:
    """A container with the labels kubelet puts on every container, plus `labels`."""
    kubelet = {
        NAME_LABEL: name,
        "io.kubernetes.pod.name": of.name,
        "io.kubernetes.pod.namespace": of.namespace,
        "io.kubernetes.pod.uid": of.uid,
    }
    return ContainerInfo(
        name=name, pod=of, id=cid, labels=kubelet | (labels or {}), tags=tags or {}
    )
