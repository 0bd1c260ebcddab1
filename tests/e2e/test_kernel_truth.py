"""What the kernel enforces is what the agent says, on real containerd and runc.

- A container started while its cpuset changes: containerd 1.6 applies an update
  that arrives during StartContainer to the spec only, so the task starts with
  the old cpuset (10 to 11 of 12 trials before the fix). The agent sends it
  again once the start is over.
- A partial UpdateContainerResources (crictl update --memory) keeps an exclusive
  container exclusive.
- A cpuset changed behind the agent's back is repaired by the periodic reconcile.
- A create whose caller gave up (containerd paused mid-create) keeps its CPU from
  others, and the container containerd finishes anyway is tracked on a relist.

Every check reads /proc/<pid>/status of the container's process. Needs root and
containerd (CI installs them).
"""

from __future__ import annotations

import concurrent.futures
import os
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from agent.config import AgentConfig
from agent.daemon import Daemon
from agent.kubelet import kubelet_container_config
from agent.workload import QoSClass
from devtools.containerd import PrivateContainerd
from devtools.criclient import CRIClient, CRIError
from devtools.pods import sleeper_config
from proto import cri_pb2
from tests.e2e.conftest import Pods
from topology.cpuset import CPUSet

pytestmark = [pytest.mark.root, pytest.mark.containerd]

SETTLE_S = 15.0
# Without the fix, 10 or 11 of 12 trials fail here (runc's start made slower by
# MOUNTS bind mounts widens the window); 5 trials all passing by luck is ~1e-4.
TRIALS = 5
MOUNTS = 200

AgentFactory = Callable[..., tuple[Daemon, Pods]]


@pytest.fixture
def make_agent(containerd: PrivateContainerd) -> Iterator[AgentFactory]:
    made: list[tuple[Daemon, Pods, CRIClient]] = []

    def make(**config: object) -> tuple[Daemon, Pods]:
        base = Path(tempfile.mkdtemp(prefix="numa-e2e-kernel-"))
        daemon = Daemon(
            AgentConfig(
                runtime_endpoint=containerd.endpoint,
                listen=f"unix://{base}/agent.sock",
                state_dir=str(base / "state"),
                feature_file="",  # never the host's NFD directory
                **config,  # type: ignore[arg-type]
            ),
            runtime_wait_s=10,
        )
        daemon.start()
        client = CRIClient(daemon.config.listen)
        pods = Pods(containerd, client=client)
        made.append((daemon, pods, client))
        return daemon, pods

    yield make
    for daemon, pods, client in reversed(made):
        pods.remove_all()
        client.close()
        daemon.stop()


def create(
    pods: Pods, name: str, qos: QoSClass, milli: int, mount: Path | None = None
) -> tuple[str, str]:
    """A pod with one container, created (not started): (sandbox, container). Bind
    mounts make runc's start slower: the window where containerd drops an update wider."""
    pod = pods.pod_config(name, qos=qos)
    sandbox = pods.run(pod)
    config = sleeper_config(pod, qos, milli, pods.containerd.image)
    if mount is not None:
        config.mounts.extend(
            cri_pb2.Mount(container_path=f"/mnt/m{i}", host_path=str(mount), readonly=True)
            for i in range(MOUNTS)
        )
    return sandbox, pods.client.create_container(sandbox, config, pod)


def kernel(containerd: PrivateContainerd, cid: str) -> CPUSet:
    return CPUSet.parse(containerd.proc_status(cid).cpus_allowed)


def wanted(daemon: Daemon, cid: str) -> CPUSet:
    assert daemon.node is not None
    placed = {p.container_id: p for p in daemon.node.placements()}
    return CPUSet.parse(placed[cid].cpuset_cpus)


def settle(daemon: Daemon) -> None:
    assert daemon.node is not None
    assert daemon.node.wait_for_updates(SETTLE_S), "cpuset updates still owed"


def test_a_container_started_while_its_cpuset_changes_runs_where_the_agent_says(
    containerd: PrivateContainerd, make_agent: AgentFactory, tmp_path: Path
) -> None:
    # The periodic reconcile is off: only the start itself may put it right.
    daemon, pods = make_agent(reconcile_period=0)
    for trial in range(TRIALS):
        first, _ = create(pods, f"g1-{trial}", QoSClass.GUARANTEED, 1000)
        _, batch = create(pods, f"b-{trial}", QoSClass.BESTEFFORT, 0, mount=tmp_path)
        # The exclusive container goes: the agent widens batch while it is only CREATED.
        pods.remove(first)
        settle(daemon)
        # kubelet starts batch while a new Guaranteed container takes a CPU, and the
        # agent narrows batch: the narrowing lands while batch starts.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            second = pool.submit(create, pods, f"g2-{trial}", QoSClass.GUARANTEED, 1000)
            pods.client.start_container(batch)
            _, g2 = second.result(30)
        pods.client.start_container(g2)
        settle(daemon)
        own = kernel(containerd, g2)
        assert len(own) == 1
        assert kernel(containerd, batch) == wanted(daemon, batch), f"trial {trial}"
        assert kernel(containerd, batch).isdisjoint(own), f"trial {trial}: batch on g2's CPU"
        pods.remove_all()
        settle(daemon)


def test_a_partial_update_keeps_an_exclusive_container_exclusive(
    containerd: PrivateContainerd, make_agent: AgentFactory
) -> None:
    daemon, pods = make_agent()
    _, db = create(pods, "db", QoSClass.GUARANTEED, 1000)
    pods.client.start_container(db)
    _, batch = create(pods, "batch", QoSClass.BESTEFFORT, 0)
    pods.client.start_container(batch)
    settle(daemon)
    own = kernel(containerd, db)
    assert len(own) == 1
    # What `crictl update --memory 128M` sends: the memory limit alone.
    pods.client.update_container_resources(
        db, cri_pb2.LinuxContainerResources(memory_limit_in_bytes=128 << 20)
    )
    settle(daemon)
    assert kernel(containerd, db) == own
    assert kernel(containerd, batch).isdisjoint(own)
    status = containerd.client().container_status(db).status.resources.linux
    assert status.memory_limit_in_bytes == 128 << 20 and status.cpu_quota == 100_000
    # db still holds its CPU: a second exclusive CPU would take the last shared one.
    with pytest.raises(CRIError) as refused:
        create(pods, "db2", QoSClass.GUARANTEED, 1000)
    assert refused.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_a_cpuset_changed_behind_the_agents_back_is_repaired_within_a_period(
    containerd: PrivateContainerd, make_agent: AgentFactory
) -> None:
    daemon, pods = make_agent(reconcile_period=0.5)
    _, db = create(pods, "db", QoSClass.GUARANTEED, 1000)
    pods.client.start_container(db)
    _, batch = create(pods, "batch", QoSClass.BESTEFFORT, 0)
    pods.client.start_container(batch)
    settle(daemon)
    own = kernel(containerd, db)
    everything = kernel(containerd, batch) | own
    # Someone puts batch on db's CPU straight at containerd, past the agent.
    containerd.client().update_container_resources(
        batch, cri_pb2.LinuxContainerResources(cpuset_cpus=str(everything))
    )
    assert kernel(containerd, batch) == everything
    deadline = time.monotonic() + 10
    while kernel(containerd, batch) != wanted(daemon, batch):
        assert time.monotonic() < deadline, "not repaired within 10 s at a 0.5 s period"
        time.sleep(0.1)
    assert kernel(containerd, batch).isdisjoint(own)


def test_a_create_whose_caller_gave_up_keeps_its_cpu_from_others(
    containerd: PrivateContainerd, make_agent: AgentFactory
) -> None:
    """containerd is paused while it creates a container; kubelet's deadline passes and
    it hears DEADLINE_EXCEEDED; containerd, resumed, finishes the create with the CPU the
    agent wrote. That CPU must not go to anyone else, and a relist tracks the container."""
    daemon, pods = make_agent()
    pod = pods.pod_config("late", qos=QoSClass.GUARANTEED)
    sandbox = pods.run(pod)
    config = kubelet_container_config(
        pod, "app", 1000, 1000, 64 << 20, image=containerd.image, command=["/bin/sleep", "3600"]
    )
    impatient = CRIClient(daemon.config.listen, timeout=1.0)
    pid = containerd.pid
    assert pid is not None
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            call = pool.submit(impatient.create_container, sandbox, config, pod)
            # Once the agent has placed it (its CPU is exclusive), containerd stops.
            deadline = time.monotonic() + 5
            while not any(len(c.exclusive) for c in daemon.node.capacity()):  # type: ignore[union-attr]
                assert time.monotonic() < deadline, "the create never reached the agent"
                time.sleep(0.001)
            os.kill(pid, signal.SIGSTOP)
            try:
                with pytest.raises(CRIError) as late:
                    call.result(10)
            finally:
                os.kill(pid, signal.SIGCONT)
        assert late.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    finally:
        impatient.close()
    reserved = 0
    for pool in daemon.node.capacity():  # type: ignore[union-attr]
        reserved |= pool.exclusive.mask
    direct = containerd.client()
    deadline = time.monotonic() + 15
    while not (made := [c for c in direct.list_containers() if c.pod_sandbox_id == sandbox]):
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if not made:
        # The relay cancelled the create at containerd when kubelet's deadline passed,
        # as a direct caller's cancel would, and containerd dropped it. The outcome
        # stays unknown to the agent: the CPU is still kept from everyone else.
        _, batch = create(pods, "batch", QoSClass.BESTEFFORT, 0)
        pods.client.start_container(batch)
        settle(daemon)
        assert len(CPUSet(reserved)) == 1
        assert kernel(containerd, batch).isdisjoint(CPUSet(reserved))
        return
    (late_container,) = made
    held = CPUSet.parse(
        direct.container_status(late_container.id).status.resources.linux.cpuset_cpus
    )
    assert len(held) == 1
    # Someone else comes: not on the CPU the late container holds.
    _, batch = create(pods, "batch", QoSClass.BESTEFFORT, 0)
    pods.client.start_container(batch)
    settle(daemon)
    assert kernel(containerd, batch).isdisjoint(held)
    # kubelet's relist, through the agent: the container is tracked where it was made.
    pods.client.list_containers()
    assert wanted(daemon, late_container.id) == held
