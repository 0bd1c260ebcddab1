"""NRI's pods and containers as the CRI requests the node agent reads, and the
version check, as tables."""

from __future__ import annotations

import pytest

from agent.nri import convert, methods
from proto import cri_pb2, nri_pb2


def _container(**annotations: str) -> nri_pb2.Container:
    res = nri_pb2.LinuxResources(cpu=nri_pb2.LinuxCPU(cpus="0-3", mems="0"))
    res.cpu.shares.value = 2048
    res.cpu.quota.value = 200000
    res.cpu.period.value = 100000
    res.memory.limit.value = 1 << 30
    return nri_pb2.Container(
        id="c1",
        pod_sandbox_id="p1",
        name="app",
        state=nri_pb2.CONTAINER_RUNNING,
        labels={"io.kubernetes.container.name": "app"},
        annotations=annotations,
        linux=nri_pb2.LinuxContainer(resources=res),
        pid=42,
    )


POD = nri_pb2.PodSandbox(
    id="p1",
    name="db",
    uid="u1",
    namespace="prod",
    labels={"app": "db"},
    annotations={"numa-agent.io/affinity": "x"},
    linux=nri_pb2.LinuxPodSandbox(cgroup_parent="/kubepods/pod-u1"),
)


def test_a_create_request_carries_what_kubelet_would_send() -> None:
    req = convert.create_request(POD, _container(**{convert.RESTART_COUNT: "3"}))
    assert req.pod_sandbox_id == "p1"
    assert (req.config.metadata.name, req.config.metadata.attempt) == ("app", 3)
    assert req.config.linux.resources == cri_pb2.LinuxContainerResources(
        cpu_shares=2048,
        cpu_quota=200000,
        cpu_period=100000,
        memory_limit_in_bytes=1 << 30,
        cpuset_cpus="0-3",
        cpuset_mems="0",
    )
    # kubelet's pod labels on the container, the pod's annotations and cgroup parent.
    assert req.config.labels["io.kubernetes.pod.namespace"] == "prod"
    assert req.sandbox_config.annotations["numa-agent.io/affinity"] == "x"
    assert req.sandbox_config.linux.cgroup_parent == "/kubepods/pod-u1"


@pytest.mark.parametrize(("text", "attempt"), [("0", 0), ("7", 7), ("", 0), ("x", 0)])
def test_the_attempt_comes_from_kubelets_restart_count(text: str, attempt: int) -> None:
    assert convert.attempt_of(_container(**{convert.RESTART_COUNT: text})) == attempt


@pytest.mark.parametrize(
    ("state", "cri_state"),
    [
        (nri_pb2.CONTAINER_CREATED, cri_pb2.CONTAINER_CREATED),
        (nri_pb2.CONTAINER_RUNNING, cri_pb2.CONTAINER_RUNNING),
        (nri_pb2.CONTAINER_PAUSED, cri_pb2.CONTAINER_RUNNING),
        (nri_pb2.CONTAINER_STOPPED, cri_pb2.CONTAINER_EXITED),
        (nri_pb2.CONTAINER_UNKNOWN, cri_pb2.CONTAINER_UNKNOWN),
    ],
)
def test_states_map_to_cri(state: int, cri_state: int) -> None:
    ctr = _container()
    ctr.state = state  # type: ignore[assignment]
    assert convert.container(ctr).state == cri_state
    assert convert.status(ctr).state == cri_state


def test_an_update_sets_only_the_cpusets() -> None:
    res = convert.nri_cpusets("4-7", "1")
    assert res == nri_pb2.LinuxResources(cpu=nri_pb2.LinuxCPU(cpus="4-7", mems="1"))
    assert not res.cpu.HasField("shares") and not res.HasField("memory")


def test_the_event_mask_has_a_bit_per_subscribed_event() -> None:
    mask = methods.event_mask((nri_pb2.RUN_POD_SANDBOX, nri_pb2.CREATE_CONTAINER))
    assert mask == 0b1001


@pytest.mark.parametrize(
    ("version", "ok"),
    [
        ("v0.12.0", True),
        ("v0.3.0", True),
        ("0.8.1", True),
        ("v0.13.0-rc.1", True),
        ("", True),
        ("unknown", True),
        ("v0.2.9", False),
        ("v1.0.0", False),
        ("v2.3.4", False),
        ("banana", False),
    ],
)
def test_versions(version: str, ok: bool) -> None:
    if ok:
        methods.check_version("rt", version)
    else:
        with pytest.raises(methods.UnsupportedVersion, match="rt"):
            methods.check_version("rt", version)
