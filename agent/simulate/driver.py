"""Replaying a scenario's events through the node agent's CRI handlers, as kubelet would.

Requests are built by agent.kubelet's builders, serialized, and given to
the same handlers the relay uses, whose `forward` is the in-memory runtime; the
final cpusets are read back from the runtime, so they show what reached it.
"""

from __future__ import annotations

import contextlib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from google.protobuf.message import Message

from agent.kubelet import (
    POD_NAME_LABEL,
    POD_NAMESPACE_LABEL,
    kubelet_container_config,
    kubelet_container_resources,
    kubelet_pod_config,
)
from agent.node.agent import NodeAgent, Placement
from agent.node.fingerprint import legacy_fingerprint, machine_fingerprint
from agent.node.runtime_access import InProcessRuntimeAccess
from agent.policy.policy import Decision, PoolCapacity
from agent.relay.backend import BackendError
from agent.relay.hooks import HookAbort
from agent.relay.methods import RUNTIME_SERVICE
from agent.runtime.inprocess import dispatch, in_process_forward
from agent.runtime.memory import MemoryRuntime
from agent.scratch import FAST_TMP
from agent.simulate.machine import load_machine
from agent.simulate.scenario import (
    ContainerSpec,
    CreatePod,
    ExitContainer,
    PodSpec,
    RecreateContainer,
    RemovePod,
    ResizeContainer,
    Restart,
    Scenario,
    load_scenario,
)
from agent.state.store import StateStore
from agent.workload import ContainerInfo
from proto import cri_pb2
from topology.tree import Machine

Reply = TypeVar("Reply", bound=Message)


class SimulationError(RuntimeError):
    """A CRI call other than a container's creation failed: the scenario could not run."""


@dataclass(frozen=True, slots=True)
class RunningContainer:
    """A running container at the end, with its cpusets as the runtime has them."""

    namespace: str
    pod: str
    name: str
    container_id: str
    cpuset_cpus: str
    cpuset_mems: str
    exclusive: bool
    pool: str


@dataclass(frozen=True, slots=True)
class Refusal:
    """A container whose CreateContainer the agent refused (code: gRPC status name)."""

    namespace: str
    pod: str
    name: str
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class Explained:
    """One placement decision as the agent reported it (--explain)."""

    namespace: str
    pod: str
    name: str
    pool: str
    explanation: str


@dataclass(frozen=True, slots=True)
class SimulationResult:
    scenario: Scenario
    machine: Machine
    containers: tuple[RunningContainer, ...]
    errors: tuple[Refusal, ...]
    decisions: tuple[Explained, ...]
    # The agent's books at the end (for the machine map: the status document's input).
    placements: tuple[Placement, ...] = ()
    capacity: tuple[PoolCapacity, ...] = ()


def simulate_file(path: str | Path) -> SimulationResult:
    """Load, validate and run a scenario file (ScenarioError, SimulationError)."""
    scenario = load_scenario(path)
    return run_scenario(scenario, load_machine(scenario.topology))


def run_scenario(
    scenario: Scenario,
    machine: Machine,
    runtime: MemoryRuntime | None = None,
    state_dir: Path | None = None,
) -> SimulationResult:
    """Run every event of `scenario` on `machine`, in order, synchronously.

    `runtime` (a fresh one by default) lets tests look at the calls it served.
    A scenario with restart events runs the agent with a state file in a
    temporary directory, as the daemon does, so that a restart has one to read;
    `state_dir` runs it with its state file there (benchmarks weigh it).
    """
    runtime = runtime if runtime is not None else MemoryRuntime()
    decisions: list[Explained] = []

    def on_decision(info: ContainerInfo, decision: Decision) -> None:
        decisions.append(
            Explained(info.namespace, info.pod.name, info.name, decision.pool, decision.explanation)
        )

    with contextlib.ExitStack() as stack:
        store = None
        if state_dir is not None:  # the caller looks at the state file afterwards
            store = StateStore(state_dir, machine_fingerprint(machine))
        elif any(isinstance(event, Restart) for event in scenario.events):
            temporary = stack.enter_context(
                tempfile.TemporaryDirectory(prefix="na-sim-", dir=FAST_TMP)
            )
            store = StateStore(
                temporary,
                machine_fingerprint(machine),
                also_accept=(legacy_fingerprint(machine),),
            )

        def start_agent() -> NodeAgent:
            agent = NodeAgent(
                machine,
                scenario.config,
                InProcessRuntimeAccess(runtime),
                store=store,
                background_updates=False,
                on_decision=on_decision,
            )
            agent.start()
            return agent

        agent = start_agent()
        try:
            kubelet = _Kubelet(runtime, agent)
            for index, event in enumerate(scenario.events):
                if isinstance(event, Restart):
                    agent.close()
                    assert store is not None
                    _become(store, event.state)
                    agent = start_agent()
                    kubelet.handlers = agent.handlers()
                    continue
                kubelet.play(scenario, event, f"{scenario.source}: events[{index}]")
            books, capacity = agent.placements_and_capacity()
            placements = {p.container_id: p for p in books}
        finally:
            agent.close()
    return SimulationResult(
        scenario,
        machine,
        _running(runtime, placements),
        tuple(kubelet.refusals),
        tuple(decisions),
        tuple(books),
        capacity,
    )


def _become(store: StateStore, state: str) -> None:
    """What happens to the state file while the agent is down (Restart.state)."""
    if state == "lost":
        store.path.unlink(missing_ok=True)
    elif state == "corrupt":
        store.path.write_bytes(b"\x00\x17 garbage, not the agent's state \xff")


class _Kubelet:
    """Plays kubelet: builds its requests and sends them through the agent's handlers."""

    def __init__(self, runtime: MemoryRuntime, agent: NodeAgent) -> None:
        self.runtime = runtime
        self.handlers = agent.handlers()
        self.refusals: list[Refusal] = []
        self.sandboxes: dict[str, str] = {}  # pod key -> sandbox id
        self.containers: dict[str, dict[str, str]] = {}  # pod key -> name -> container id
        self.configs: dict[str, cri_pb2.PodSandboxConfig] = {}  # pod key -> its sandbox config
        self.specs: dict[tuple[str, str], ContainerSpec] = {}  # resources now (resizes)
        self.attempts: dict[tuple[str, str], int] = {}  # (pod key, name) -> attempt

    def call(self, rpc: str, request: Message, reply: type[Reply], where: str) -> Reply:
        """One CRI call through the agent's handler for `rpc` (or straight to the
        runtime when the agent does not intercept it, as the relay does)."""
        try:
            raw = self.send(rpc, request)
        except (HookAbort, BackendError) as exc:
            raise SimulationError(f"{where}: {rpc} failed: {exc}") from exc
        return reply.FromString(raw)

    def send(self, rpc: str, request: Message) -> bytes:
        method = RUNTIME_SERVICE + rpc
        data = request.SerializeToString()
        handler = self.handlers.get(method)
        if handler is None:
            return dispatch(self.runtime, method, data)
        return handler(data, in_process_forward(self.runtime, method))

    def play(
        self,
        scenario: Scenario,
        event: CreatePod | RemovePod | ExitContainer | RecreateContainer | ResizeContainer,
        where: str,
    ) -> None:
        pod = scenario.pod(event.pod)
        if isinstance(event, CreatePod):
            self.create_pod(pod, f"{where} (create {pod.key})")
        elif isinstance(event, RemovePod):
            self.remove_pod(pod, f"{where} (remove {pod.key})")
        elif isinstance(event, RecreateContainer):
            self.recreate(pod, event.container, f"{where} (recreate {pod.key}/{event.container})")
        elif isinstance(event, ResizeContainer):
            self.resize(pod, event, f"{where} (resize {pod.key}/{event.container})")
        else:
            assert isinstance(event, ExitContainer)
            self.exit_container(pod, event.container, f"{where} (exit {pod.key}/{event.container})")

    def create_pod(self, pod: PodSpec, where: str) -> None:
        config = kubelet_pod_config(
            pod.name, pod.namespace, pod.uid, pod.labels, pod.annotations, pod.qos
        )
        sandbox = self.call(
            "RunPodSandbox",
            cri_pb2.RunPodSandboxRequest(config=config),
            cri_pb2.RunPodSandboxResponse,
            where,
        ).pod_sandbox_id
        self.sandboxes[pod.key] = sandbox
        self.containers[pod.key] = {}
        self.configs[pod.key] = config
        # kubelet runs init containers one at a time, each to completion, then
        # notices the exit on its next relist before creating the app containers.
        for spec in pod.init_containers:
            container_id = self.create_container(pod, sandbox, config, spec, where)
            if container_id:
                self.runtime.exit_container(container_id)
                self.relist(where)
        for spec in pod.containers:
            self.create_container(pod, sandbox, config, spec, where)

    def create_container(
        self,
        pod: PodSpec,
        sandbox: str,
        pod_config: cri_pb2.PodSandboxConfig,
        spec: ContainerSpec,
        where: str,
    ) -> str:
        """Create and start one container; "" if the agent refused it (recorded)."""
        spec = self.specs.setdefault((pod.key, spec.name), spec)
        attempt = self.attempts.get((pod.key, spec.name), 0)
        config = kubelet_container_config(
            pod_config,
            spec.name,
            spec.cpu_milli,
            spec.cpu_limit_milli,
            spec.memory_limit_bytes,
            attempt=attempt,
        )
        request = cri_pb2.CreateContainerRequest(
            pod_sandbox_id=sandbox, config=config, sandbox_config=pod_config
        )
        try:
            raw = self.send("CreateContainer", request)
        except HookAbort as abort:
            self.refusals.append(
                Refusal(pod.namespace, pod.name, spec.name, abort.code.name, abort.details)
            )
            return ""
        except BackendError as exc:
            raise SimulationError(f"{where}: CreateContainer {spec.name} failed: {exc}") from exc
        container_id = cri_pb2.CreateContainerResponse.FromString(raw).container_id
        self.containers[pod.key][spec.name] = container_id
        self.call(
            "StartContainer",
            cri_pb2.StartContainerRequest(container_id=container_id),
            cri_pb2.StartContainerResponse,
            where,
        )
        return container_id

    def relist(self, where: str) -> None:
        self.call(
            "ListContainers",
            cri_pb2.ListContainersRequest(),
            cri_pb2.ListContainersResponse,
            where,
        )

    def recreate(self, pod: PodSpec, name: str, where: str) -> None:
        """kubelet's restart of an exited container: a new one, same name, attempt + 1."""
        key = (pod.key, name)
        self.attempts[key] = self.attempts.get(key, 0) + 1
        spec = self.specs.get(key) or next(c for c in pod.containers if c.name == name)
        self.create_container(pod, self.sandboxes[pod.key], self.configs[pod.key], spec, where)

    def resize(self, pod: PodSpec, event: ResizeContainer, where: str) -> None:
        """kubelet's in-place resize: UpdateContainerResources with its fields."""
        container_id = self.containers[pod.key].get(event.container)
        if container_id is None:
            return  # it was refused: nothing runs to resize
        key = (pod.key, event.container)
        spec = event.apply(self.specs[key])
        linux = kubelet_container_resources(
            spec.cpu_milli, spec.cpu_limit_milli, spec.memory_limit_bytes
        )
        request = cri_pb2.UpdateContainerResourcesRequest(container_id=container_id, linux=linux)
        try:
            self.send("UpdateContainerResources", request)
        except HookAbort as abort:
            self.refusals.append(
                Refusal(pod.namespace, pod.name, spec.name, abort.code.name, abort.details)
            )
            return
        except BackendError as exc:
            raise SimulationError(f"{where}: UpdateContainerResources failed: {exc}") from exc
        self.specs[key] = spec

    def exit_container(self, pod: PodSpec, name: str, where: str) -> None:
        container_id = self.containers[pod.key].get(name)
        if container_id is None:
            return  # it was refused: nothing runs to exit
        self.runtime.exit_container(container_id)
        self.relist(where)

    def remove_pod(self, pod: PodSpec, where: str) -> None:
        """kubelet's pod teardown: stop and remove each container, then the sandbox."""
        ids = list(self.containers.pop(pod.key).values())
        for key in [k for k in self.specs if k[0] == pod.key]:
            del self.specs[key]
            self.attempts.pop(key, None)
        for container_id in ids:
            self.call(
                "StopContainer",
                cri_pb2.StopContainerRequest(container_id=container_id),
                cri_pb2.StopContainerResponse,
                where,
            )
        for container_id in ids:
            self.call(
                "RemoveContainer",
                cri_pb2.RemoveContainerRequest(container_id=container_id),
                cri_pb2.RemoveContainerResponse,
                where,
            )
        sandbox = self.sandboxes.pop(pod.key)
        self.call(
            "StopPodSandbox",
            cri_pb2.StopPodSandboxRequest(pod_sandbox_id=sandbox),
            cri_pb2.StopPodSandboxResponse,
            where,
        )
        self.call(
            "RemovePodSandbox",
            cri_pb2.RemovePodSandboxRequest(pod_sandbox_id=sandbox),
            cri_pb2.RemovePodSandboxResponse,
            where,
        )


def _running(
    runtime: MemoryRuntime, placements: dict[str, Placement]
) -> tuple[RunningContainer, ...]:
    """Running containers in creation order, cpusets from the runtime's ContainerStatus."""
    listed = runtime.list_containers(
        cri_pb2.ListContainersRequest(
            filter=cri_pb2.ContainerFilter(
                state=cri_pb2.ContainerStateValue(state=cri_pb2.CONTAINER_RUNNING)
            )
        )
    ).containers
    out: list[RunningContainer] = []
    for container in listed:
        status = runtime.container_status(
            cri_pb2.ContainerStatusRequest(container_id=container.id)
        ).status
        linux = status.resources.linux
        labels = container.labels
        placement = placements.get(container.id)
        out.append(
            RunningContainer(
                namespace=labels[POD_NAMESPACE_LABEL],
                pod=labels[POD_NAME_LABEL],
                name=container.metadata.name,
                container_id=container.id,
                cpuset_cpus=linux.cpuset_cpus,
                cpuset_mems=linux.cpuset_mems,
                exclusive=placement.exclusive if placement else False,
                pool=placement.pool if placement else "",
            )
        )
    return tuple(out)
