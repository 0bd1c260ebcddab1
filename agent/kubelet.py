"""kubelet's side of the CRI: its io.kubernetes.* labels, its CPU and cgroup encodings,
and pure builders of the pod and container configs it sends.

One definition for both directions: the policy decodes what kubelet sent (shares to
milliCPU, the QoS class from the cgroup parent) and `simulate` encodes requests the
same way kubelet does (pkg/kubelet/cm/helpers_linux.go). Protobuf messages only, no gRPC.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from agent.workload import QoSClass
from proto import cri_pb2

# kubelet's constants (pkg/kubelet/cm/helpers_linux.go).
MIN_SHARES = 2  # what a zero CPU request (BestEffort) is sent as
SHARES_PER_CPU = 1024
MILLI_CPU_TO_CPU = 1000
DEFAULT_CPU_PERIOD = 100_000  # CFS period in µs; also assumed when a quota comes without one
MIN_QUOTA_PERIOD = 1000

POD_NAME_LABEL = "io.kubernetes.pod.name"
POD_NAMESPACE_LABEL = "io.kubernetes.pod.namespace"
POD_UID_LABEL = "io.kubernetes.pod.uid"
CONTAINER_NAME_LABEL = "io.kubernetes.container.name"
RESTART_COUNT_ANNOTATION = "io.kubernetes.container.restartCount"

# --------------------------------------------------------------------------- encodings


def milli_cpu_to_shares(milli_cpu: int) -> int:
    """kubelet's MilliCPUToShares: a request of 0 (BestEffort) still gets 2 shares."""
    if milli_cpu == 0:
        return MIN_SHARES
    return max(MIN_SHARES, milli_cpu * SHARES_PER_CPU // MILLI_CPU_TO_CPU)


def shares_to_milli_cpu(shares: int) -> int:
    """The CPU request back from cpu_shares, to the nearest milliCPU; the minimum is 0.

    Exact for whole CPUs (what decides exclusive CPUs), within 1m otherwise:
    kubelet's integer division loses the rest.
    """
    if shares <= MIN_SHARES:
        return 0
    return (shares * MILLI_CPU_TO_CPU + SHARES_PER_CPU // 2) // SHARES_PER_CPU


def milli_cpu_to_quota(milli_cpu: int, period: int = DEFAULT_CPU_PERIOD) -> int:
    """kubelet's milliCPUToQuota: 0 means no limit."""
    if milli_cpu == 0:
        return 0
    return max(MIN_QUOTA_PERIOD, milli_cpu * period // MILLI_CPU_TO_CPU)


def quota_to_milli_cpu(quota: int, period: int) -> int:
    """The CPU limit back from cpu_quota / cpu_period; 0 (or less): no limit.

    A quota without a period is read against kubelet's default period.
    """
    if quota <= 0:
        return 0
    if period <= 0:
        period = DEFAULT_CPU_PERIOD
    return (quota * MILLI_CPU_TO_CPU + period // 2) // period


def pod_cgroup_parent(uid: str, qos: QoSClass, cgroup_driver: str = "systemd") -> str:
    """The pod cgroup kubelet puts in LinuxPodSandboxConfig.cgroup_parent.

    With the systemd driver kubelet escapes '-' in the uid to '_' (systemd uses
    '-' as the slice hierarchy separator).
    """
    if cgroup_driver == "systemd":
        tier = {
            QoSClass.GUARANTEED: "",
            QoSClass.BURSTABLE: "-burstable",
            QoSClass.BESTEFFORT: "-besteffort",
        }[qos]
        return f"kubepods{tier}-pod{uid.replace('-', '_')}.slice"
    if cgroup_driver == "cgroupfs":
        tier = {
            QoSClass.GUARANTEED: "",
            QoSClass.BURSTABLE: "/burstable",
            QoSClass.BESTEFFORT: "/besteffort",
        }[qos]
        return f"/kubepods{tier}/pod{uid}"
    raise ValueError(f"cgroup driver {cgroup_driver!r}: expected 'systemd' or 'cgroupfs'")


# systemd: kubepods-burstable-pod<uid>.slice, kubepods-pod<uid>.slice;
# cgroupfs: /kubepods/burstable/pod<uid>, /kubepods/pod<uid>.
_SYSTEMD_QOS = re.compile(r"kubepods(?:-(burstable|besteffort))?-pod[^/]*\.slice")
_CGROUPFS_QOS = re.compile(r"/kubepods(?:/(burstable|besteffort))?/pod[^/]+/?$")


def qos_from_cgroup_parent(cgroup_parent: str) -> QoSClass | None:
    """The pod's QoS class from its cgroup parent (systemd or cgroupfs driver); None if unknown."""
    path = cgroup_parent.strip()
    last = path.rstrip("/").rsplit("/", 1)[-1]
    match = _SYSTEMD_QOS.fullmatch(last)
    if match is None:
        match = _CGROUPFS_QOS.search(path)
    if match is None:
        return None
    tier = match.group(1)
    if tier == "burstable":
        return QoSClass.BURSTABLE
    if tier == "besteffort":
        return QoSClass.BESTEFFORT
    return QoSClass.GUARANTEED


# --------------------------------------------------------------------------- builders


def kubelet_pod_config(
    name: str,
    namespace: str,
    uid: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    qos: QoSClass = QoSClass.BESTEFFORT,
    cgroup_driver: str = "systemd",
    *,
    attempt: int = 0,
    host_network: bool = True,
    log_root: str = "/var/log/pods",
) -> cri_pb2.PodSandboxConfig:
    """The PodSandboxConfig kubelet sends in RunPodSandbox (and again in
    CreateContainerRequest.sandbox_config). Host networking by default: it
    needs no CNI, and kubelet leaves `hostname` empty for such pods."""
    all_labels = dict(labels or {})
    all_labels.update({POD_NAME_LABEL: name, POD_NAMESPACE_LABEL: namespace, POD_UID_LABEL: uid})
    network = cri_pb2.NODE if host_network else cri_pb2.POD
    return cri_pb2.PodSandboxConfig(
        metadata=cri_pb2.PodSandboxMetadata(
            name=name, uid=uid, namespace=namespace, attempt=attempt
        ),
        hostname="" if host_network else name,
        log_directory=f"{log_root}/{namespace}_{name}_{uid}",
        labels=all_labels,
        annotations=dict(annotations or {}),
        linux=cri_pb2.LinuxPodSandboxConfig(
            cgroup_parent=pod_cgroup_parent(uid, qos, cgroup_driver),
            security_context=cri_pb2.LinuxSandboxSecurityContext(
                namespace_options=cri_pb2.NamespaceOption(
                    network=network, pid=cri_pb2.CONTAINER, ipc=cri_pb2.POD
                )
            ),
        ),
    )


def kubelet_container_resources(
    cpu_request_milli: int = 0,
    cpu_limit_milli: int = 0,
    memory_limit_bytes: int = 0,
    *,
    cpu_period: int = DEFAULT_CPU_PERIOD,
    cpuset_cpus: str = "",
    oom_score_adj: int = 0,
) -> cri_pb2.LinuxContainerResources:
    """The LinuxContainerResources kubelet computes from a container's requests
    and limits. Period and quota are sent only when there is a CPU limit."""
    resources = cri_pb2.LinuxContainerResources(
        cpu_shares=milli_cpu_to_shares(cpu_request_milli),
        memory_limit_in_bytes=memory_limit_bytes,
        oom_score_adj=oom_score_adj,
        cpuset_cpus=cpuset_cpus,
    )
    if cpu_limit_milli:
        resources.cpu_period = cpu_period
        resources.cpu_quota = milli_cpu_to_quota(cpu_limit_milli, cpu_period)
    return resources


def kubelet_container_config(
    pod: cri_pb2.PodSandboxConfig,
    name: str,
    cpu_request_milli: int = 0,
    cpu_limit_milli: int = 0,
    memory_limit_bytes: int = 0,
    *,
    image: str = "docker.io/library/busybox:latest",
    command: Sequence[str] = (),
    args: Sequence[str] = (),
    annotations: Mapping[str, str] | None = None,
    attempt: int = 0,
    cpuset_cpus: str = "",
    oom_score_adj: int = 0,
) -> cri_pb2.ContainerConfig:
    """The ContainerConfig kubelet sends in CreateContainer for one container
    of `pod`, with kubelet's io.kubernetes.* labels."""
    md = pod.metadata
    all_annotations = {RESTART_COUNT_ANNOTATION: str(attempt)}
    all_annotations.update(annotations or {})
    return cri_pb2.ContainerConfig(
        metadata=cri_pb2.ContainerMetadata(name=name, attempt=attempt),
        image=cri_pb2.ImageSpec(image=image, user_specified_image=image),
        command=list(command),
        args=list(args),
        labels={
            CONTAINER_NAME_LABEL: name,
            POD_NAME_LABEL: md.name,
            POD_NAMESPACE_LABEL: md.namespace,
            POD_UID_LABEL: md.uid,
        },
        annotations=all_annotations,
        log_path=f"{name}/{attempt}.log",
        linux=cri_pb2.LinuxContainerConfig(
            resources=kubelet_container_resources(
                cpu_request_milli,
                cpu_limit_milli,
                memory_limit_bytes,
                cpuset_cpus=cpuset_cpus,
                oom_score_adj=oom_score_adj,
            )
        ),
    )
