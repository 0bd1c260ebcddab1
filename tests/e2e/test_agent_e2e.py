"""End to end: the agent (the real daemon) in front of real containerd and runc.

Pods go through the agent's CRI socket with the project's CRI client, shaped as
kubelet shapes them; what the kernel enforces is read from /proc/<pid>/status of
the container processes. Needs root and containerd (CI installs them).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from agent.config import AgentConfig
from agent.daemon import Daemon
from agent.kubelet import kubelet_container_config
from agent.workload import QoSClass
from devtools.containerd import PrivateContainerd
from devtools.criclient import CRIClient, CRIError
from proto import cri_pb2
from tests.e2e.conftest import Pods
from topology.cpuset import CPUSet

pytestmark = [pytest.mark.root, pytest.mark.containerd]

UPDATE_WAIT_S = 15.0


@pytest.fixture
def agent(containerd: PrivateContainerd) -> Iterator[Daemon]:
    base = Path(tempfile.mkdtemp(prefix="numa-e2e-agent-"))
    config = AgentConfig(
        runtime_endpoint=containerd.endpoint,
        listen=f"unix://{base}/agent.sock",
        state_dir=str(base / "state"),
        feature_file="",  # never the host's NFD directory
    )
    daemon = Daemon(config, runtime_wait_s=10)
    daemon.start()
    yield daemon
    daemon.stop()


@pytest.fixture
def through_agent(containerd: PrivateContainerd, agent: Daemon) -> Iterator[Pods]:
    client = CRIClient(agent.config.listen)
    tracker = Pods(containerd, client=client)
    yield tracker
    tracker.remove_all()
    client.close()


def run(
    pods: Pods,
    name: str,
    qos: QoSClass,
    milli: int,
    annotations: dict[str, str] | None = None,
    containers: tuple[str, ...] = ("app",),
) -> tuple[str, list[str]]:
    pod = pods.pod_config(name, qos=qos, annotations=annotations)
    sandbox = pods.run(pod)
    guaranteed = qos is QoSClass.GUARANTEED
    ids = []
    for container in containers:
        config = kubelet_container_config(
            pod,
            container,
            milli,
            milli if guaranteed else 0,
            64 << 20 if guaranteed else 0,
            image=pods.containerd.image,
            command=["/bin/sleep", "3600"],
        )
        ids.append(pods.start_container(sandbox, pod, config))
    return sandbox, ids


def kernel_cpus(containerd: PrivateContainerd, container_id: str) -> CPUSet:
    return CPUSet.parse(containerd.proc_status(container_id).cpus_allowed)


def settled(agent: Daemon) -> None:
    assert agent.node is not None
    assert agent.node.wait_for_updates(UPDATE_WAIT_S), "cpuset updates still pending"


def test_exclusive_cpu_moves_a_running_besteffort_container_and_gives_it_back(
    containerd: PrivateContainerd, agent: Daemon, through_agent: Pods
) -> None:
    _, (batch,) = run(through_agent, "batch", QoSClass.BESTEFFORT, 0)
    all_cpus = kernel_cpus(containerd, batch)
    assert len(all_cpus) >= 2, "needs a machine with at least 2 CPUs"

    sandbox, (latency,) = run(through_agent, "latency", QoSClass.GUARANTEED, 1000)
    settled(agent)
    own = kernel_cpus(containerd, latency)
    assert len(own) == 1
    # The running BestEffort container was moved off it by the agent's update.
    moved = kernel_cpus(containerd, batch)
    assert moved == all_cpus - own
    # Memory is pinned to the NUMA node(s) of the pool.
    assert containerd.proc_status(latency).mems_allowed

    through_agent.remove(sandbox)
    settled(agent)
    assert kernel_cpus(containerd, batch) == all_cpus


def test_affinity_annotations_are_accepted_and_applied(
    containerd: PrivateContainerd, agent: Daemon, through_agent: Pods
) -> None:
    annotations = {
        "cri-resource-manager.intel.com/affinity": "sidecar: [app]",
        "cri-resource-manager.intel.com/anti-affinity": (
            "app:\n- match: {key: pod/labels/io.kubernetes.pod.name, operator: Equals, "
            "values: [other]}\n  weight: 3\n"
        ),
    }
    _, (app, sidecar) = run(
        through_agent, "paired", QoSClass.BURSTABLE, 100, annotations, ("app", "sidecar")
    )
    settled(agent)
    assert agent.node is not None
    placed = {p.name: p for p in agent.node.placements() if p.pod == "paired"}
    assert set(placed) == {"app", "sidecar"}
    # One NUMA node here: the pull puts the sidecar in the app's pool, and what
    # the agent decided is what the kernel enforces.
    assert placed["sidecar"].pool == placed["app"].pool
    for name, cid in (("app", app), ("sidecar", sidecar)):
        assert kernel_cpus(containerd, cid) == CPUSet.parse(placed[name].cpuset_cpus)


def test_bad_annotation_is_refused_before_the_runtime(
    containerd: PrivateContainerd, through_agent: Pods
) -> None:
    bad = {"cri-resource-manager.intel.com/affinity": "app:\n- match: {key: name, operator: Equal}"}
    pod = through_agent.pod_config("typo", qos=QoSClass.BURSTABLE, annotations=bad)
    sandbox = through_agent.run(pod)
    config = kubelet_container_config(
        pod, "app", 100, 0, 0, image=containerd.image, command=["/bin/sleep", "3600"]
    )
    with pytest.raises(CRIError) as err:
        through_agent.client.create_container(sandbox, config, pod)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "cri-resource-manager.intel.com/affinity" in err.value.details
    assert 'container "app", rule 1' in err.value.details and '"Equal"' in err.value.details
    # containerd never saw the container (asked directly, not through the agent).
    direct = containerd.client().list_containers()
    assert not [c for c in direct if c.pod_sandbox_id == sandbox]


def test_a_required_anti_affinity_refusal_reaches_kubelet(
    containerd: PrivateContainerd, agent: Daemon, through_agent: Pods
) -> None:
    """Two replicas that must not share the machine (kubernetes.io/hostname, one
    domain): the first runs, the second gets FAILED_PRECONDITION naming the rule, and
    containerd never sees it."""
    apart = {
        "numa-agent.io/affinity": (
            "podAntiAffinity:\n  requiredDuringSchedulingIgnoredDuringExecution:\n"
            "  - labelSelector: {matchLabels: {app: db}}\n    topologyKey: kubernetes.io/hostname\n"
        )
    }
    pods = []
    for n in range(2):
        pod = through_agent.pod_config(f"db-{n}", qos=QoSClass.BURSTABLE, annotations=apart)
        pod.labels["app"] = "db"
        pods.append((through_agent.run(pod), pod))
    config = kubelet_container_config(
        pods[0][1], "app", 100, 0, 0, image=containerd.image, command=["/bin/sleep", "3600"]
    )
    first = through_agent.start_container(pods[0][0], pods[0][1], config)
    assert containerd.proc_status(first).cpus_allowed
    config = kubelet_container_config(
        pods[1][1], "app", 100, 0, 0, image=containerd.image, command=["/bin/sleep", "3600"]
    )
    with pytest.raises(CRIError) as refused:
        through_agent.client.create_container(pods[1][0], config, pods[1][1])
    assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert "required anti-affinity at kubernetes.io/hostname" in refused.value.details
    assert "every machine already runs a pod matching app=db" in refused.value.details
    direct = containerd.client().list_containers()
    assert not [c for c in direct if c.pod_sandbox_id == pods[1][0]]


def test_a_crashed_replica_comes_back_to_its_cpus(
    containerd: PrivateContainerd, agent: Daemon, through_agent: Pods
) -> None:
    """Issue 21 on real containerd: db-0's container is stopped (as after a failed
    liveness probe); the pending db-1 is refused (db-0 still occupies the machine);
    kubelet's re-create of db-0's container (attempt 1) gets its very CPU back."""
    apart = {
        "numa-agent.io/affinity": (
            "podAntiAffinity:\n  requiredDuringSchedulingIgnoredDuringExecution:\n"
            "  - labelSelector: {matchLabels: {app: db}}\n    topologyKey: kubernetes.io/hostname\n"
        )
    }
    pod = through_agent.pod_config("db-0", qos=QoSClass.GUARANTEED, annotations=apart)
    pod.labels["app"] = "db"
    sandbox = through_agent.run(pod)

    def config(attempt: int) -> cri_pb2.ContainerConfig:
        return kubelet_container_config(
            pod,
            "app",
            1000,
            1000,
            64 << 20,
            image=containerd.image,
            command=["/bin/sleep", "3600"],
            attempt=attempt,
        )

    first = through_agent.start_container(sandbox, pod, config(0))
    settled(agent)
    before = kernel_cpus(containerd, first)
    assert len(before) == 1
    through_agent.client.stop_container(first)
    # (Burstable: on a 2-CPU machine a second exclusive CPU would fail for capacity.)
    other = through_agent.pod_config("db-1", qos=QoSClass.BURSTABLE, annotations=apart)
    other.labels["app"] = "db"
    other_sandbox = through_agent.run(other)
    with pytest.raises(CRIError) as refused:
        through_agent.client.create_container(
            other_sandbox,
            kubelet_container_config(
                other, "app", 100, 0, 0, image=containerd.image, command=["/bin/sleep"]
            ),
            other,
        )
    assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
    again = through_agent.start_container(sandbox, pod, config(1))
    settled(agent)
    assert kernel_cpus(containerd, again) == before
