"""A restart is invisible: with its state file intact, an agent that restarts at any
point leaves every container exactly where it would have been without the restart,
then and at every later step.

Two agents play the same kubelet calls on two in-memory runtimes, one of them
restarting (a new NodeAgent on the same state directory and runtime) where the
sequence says so; after every step both must agree on every container's pool,
cpusets and exclusiveness, and on which creates were refused.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.kubelet import kubelet_container_config, kubelet_container_resources, kubelet_pod_config
from agent.node.agent import NodeAgent
from agent.node.fingerprint import machine_fingerprint
from agent.node.runtime_access import InProcessRuntimeAccess
from agent.policy.config import PolicyConfig
from agent.runtime.memory import MemoryRuntime
from agent.state.store import StateStore
from agent.workload import QoSClass
from devtools.criclient import CRIError
from devtools.fakesysfs import FAST_TMP
from proto import cri_pb2
from tests.node.conftest import InProcessKubelet
from topology.shapes import SHAPES
from topology.tree import Machine

PODS = tuple(f"p{i}" for i in range(8))

View = dict[str, tuple[str, str, str, bool]]


# -- the steps ------------------------------------------------------------------


@dataclass(frozen=True)
class Create:
    pod: str
    qos: QoSClass
    milli: int  # Guaranteed: whole CPUs * 1000
    near: str | None  # an affinity to this pod's containers
    apart: str | None  # an anti-affinity to this pod's containers


@dataclass(frozen=True)
class Exit:
    pod: str


@dataclass(frozen=True)
class Resize:
    pod: str
    milli: int


@dataclass(frozen=True)
class Remove:
    pod: str


@dataclass(frozen=True)
class Restart:
    pass


Step = Create | Exit | Resize | Remove | Restart

pods = st.sampled_from(PODS)
creates = st.builds(
    Create,
    pod=pods,
    qos=st.sampled_from(list(QoSClass)),
    milli=st.integers(1, 6).map(lambda n: n * 1000) | st.sampled_from([100, 500, 1500, 2500]),
    near=st.none() | pods,
    apart=st.none() | pods,
)
steps = st.lists(
    st.one_of(
        creates,
        creates,
        st.builds(Exit, pods),
        st.builds(Resize, pods, st.sampled_from([500, 1000, 2000, 3000, 4000])),
        st.builds(Remove, pods),
        st.just(Restart()),
        st.just(Restart()),
    ),
    min_size=1,
    max_size=24,
)


# -- one node and the kubelet driving it ----------------------------------------------


class Node:
    """An agent on an in-memory runtime with a state directory, and kubelet's books."""

    def __init__(self, machine: Machine, state_dir: Path, config: PolicyConfig) -> None:
        self.machine = machine
        self.state_dir = state_dir
        self.config = config
        self.runtime = MemoryRuntime()
        self.agent = self._agent()
        self.sandboxes: dict[str, tuple[str, cri_pb2.PodSandboxConfig]] = {}
        self.containers: dict[str, str] = {}  # pod -> its container's id
        self.requests: dict[str, tuple[int, int, int]] = {}  # pod -> (request, limit, memory)
        self.refused: list[str] = []

    def _agent(self) -> NodeAgent:
        store = StateStore(self.state_dir, machine_fingerprint(self.machine))
        agent = NodeAgent(
            self.machine, self.config, InProcessRuntimeAccess(self.runtime), store=store
        )
        agent.start()
        return agent

    @property
    def kubelet(self) -> InProcessKubelet:
        return InProcessKubelet(self.agent, self.runtime)

    def restart(self) -> None:
        self.agent.close()
        self.agent = self._agent()

    def play(self, step: Step) -> None:
        if isinstance(step, Create):
            self._create(step)
        elif isinstance(step, Exit) and step.pod in self.containers:
            self.runtime.exit_container(self.containers.pop(step.pod))
            self.kubelet.list_containers()
        elif isinstance(step, Resize) and step.pod in self.containers:
            self._resize(step)
        elif isinstance(step, Remove) and step.pod in self.sandboxes:
            self._remove(step.pod)

    def _create(self, step: Create) -> None:
        if step.pod in self.sandboxes:
            return
        annotations = {}
        for target, annotation in (
            (step.near, "cri-resource-manager.intel.com/affinity"),
            (step.apart, "cri-resource-manager.intel.com/anti-affinity"),
        ):
            if target:
                annotations[annotation] = (
                    f"main: [{{scope: {{key: pod/name, operator: Equals, values: [{target}]}}, "
                    "match: {key: name, operator: Equals, values: [main]}, weight: 10}]"
                )
        config = kubelet_pod_config(
            step.pod, "default", f"uid-{step.pod}", {"app": step.pod}, annotations, step.qos
        )
        sandbox = self.kubelet.run_pod_sandbox(config)
        self.sandboxes[step.pod] = (sandbox, config)
        if step.qos is QoSClass.BESTEFFORT:
            numbers = (0, 0, 0)
        elif step.qos is QoSClass.GUARANTEED:
            numbers = (step.milli, step.milli, 1 << 30)
        else:
            numbers = (step.milli, 0, 0)
        ctr = kubelet_container_config(config, "main", *numbers)
        try:
            cid = self.kubelet.create_container(sandbox, ctr, config)
        except CRIError as err:
            self.refused.append(f"{step.pod}: {err.code.name}")
            return
        self.kubelet.start_container(cid)
        self.containers[step.pod] = cid
        self.requests[step.pod] = numbers

    def _resize(self, step: Resize) -> None:
        _, limit, memory = self.requests[step.pod]
        new_limit = step.milli if limit else 0
        linux = kubelet_container_resources(step.milli, new_limit, memory)
        try:
            self.kubelet.update_container_resources(self.containers[step.pod], linux)
        except CRIError as err:
            self.refused.append(f"resize {step.pod}: {err.code.name}")
            return
        self.requests[step.pod] = (step.milli, new_limit, memory)

    def _remove(self, pod: str) -> None:
        sandbox, _ = self.sandboxes.pop(pod)
        cid = self.containers.pop(pod, None)
        if cid is not None:
            self.kubelet.stop_container(cid)
            self.kubelet.remove_container(cid)
        self.kubelet.stop_pod_sandbox(sandbox)
        self.kubelet.remove_pod_sandbox(sandbox)

    def view(self) -> tuple[View, list[str]]:
        """Every container as the agent places it and as the runtime holds it."""
        out: View = {}
        for placement in self.agent.placements():
            status = self.runtime.container_status(
                cri_pb2.ContainerStatusRequest(container_id=placement.container_id)
            ).status.resources.linux
            assert (status.cpuset_cpus, status.cpuset_mems) == (
                placement.cpuset_cpus,
                placement.cpuset_mems,
            ), f"{placement.pod}: the runtime was not told"
            out[placement.pod] = (
                placement.pool,
                placement.cpuset_cpus,
                placement.cpuset_mems,
                placement.exclusive,
            )
        return out, list(self.refused)


@pytest.fixture
def state_dirs() -> Iterator[Callable[[], Path]]:
    made: list[str] = []

    def make() -> Path:
        # fsync on tmpfs costs nothing: thousands of sequences
        made.append(tempfile.mkdtemp(prefix="na-restart-", dir=FAST_TMP))
        return Path(made[-1])

    yield make
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


def play_both(
    machine: Machine, sequence: list[Step], dirs: Callable[[], Path], **config: object
) -> None:
    """Play `sequence` on a restarting node and on one that never restarts; compare each step."""
    policy = PolicyConfig.from_mapping(config)
    steady, restarting = Node(machine, dirs(), policy), Node(machine, dirs(), policy)
    try:
        for number, step in enumerate(sequence):
            if isinstance(step, Restart):
                restarting.restart()
            else:
                steady.play(step)
                restarting.play(step)
            assert restarting.view() == steady.view(), f"after step {number}: {step}"
    finally:
        steady.agent.close()
        restarting.agent.close()


# -- the example from the issue, and the property ---------------------------------------


@pytest.mark.parametrize("restart_at", [1, 2, 3])
def test_a_burstable_pulled_to_a_full_node_widens_back_after_a_restart(
    machines: Callable[[str], Machine], state_dirs: Callable[[], Path], restart_at: int
) -> None:
    """The issue's case: an exclusive container fills NUMA node 0; a Burstable one with
    an affinity to it lands in socket0 (its shared CPUs outside node 0). After a
    restart it must still be in socket0, and widen back when the exclusive one goes."""
    machine = machines("xeon-2s-2numa")
    node0 = machine.numa_node(0)
    fill = Create("p0", QoSClass.GUARANTEED, len(node0.cpus) * 1000, None, None)
    near = Create("p1", QoSClass.BURSTABLE, 500, "p0", None)
    sequence: list[Step] = [
        fill,
        near,
        Remove("p0"),
        Create("p2", QoSClass.BURSTABLE, 500, None, None),
    ]
    sequence.insert(restart_at, Restart())
    play_both(machine, sequence, state_dirs)


def test_the_issue_example_lands_in_socket0(
    machines: Callable[[str], Machine], tmp_path: Path
) -> None:
    machine = machines("xeon-2s-2numa")
    node = Node(machine, tmp_path, PolicyConfig())
    node.play(Create("p0", QoSClass.GUARANTEED, len(machine.numa_node(0).cpus) * 1000, None, None))
    node.play(Create("p1", QoSClass.BURSTABLE, 500, "p0", None))
    node.restart()
    view, _ = node.view()
    assert view["p1"][0] == "socket0"
    node.play(Remove("p0"))
    view, _ = node.view()
    assert view["p1"][:2] == ("socket0", str(machine.sockets[0].cpus))
    node.agent.close()


@pytest.mark.parametrize("shape", list(SHAPES))
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sequence=steps)
def test_restart_changes_nothing(
    machines: Callable[[str], Machine],
    state_dirs: Callable[[], Path],
    shape: str,
    sequence: list[Step],
) -> None:
    play_both(machines(shape), sequence, state_dirs)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sequence=steps, symmetric=st.booleans())
def test_restart_changes_nothing_with_reserved_cpus_and_colocation(
    machines: Callable[[str], Machine],
    state_dirs: Callable[[], Path],
    sequence: list[Step],
    symmetric: bool,
) -> None:
    play_both(
        machines("epyc-2s-nps4"),
        sequence,
        state_dirs,
        reserved_cpus="0,128",
        colocate_namespaces=True,
        symmetric_affinity=symmetric,
    )
