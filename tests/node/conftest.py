"""A node for the agent tests: NodeAgent + MemoryRuntime on a fake-sysfs machine,
driven as kubelet drives a runtime, either in-process (the handlers called
directly, synchronous updates) or over real unix sockets (RelayServer in front of
the runtime served over gRPC, CRIClient as kubelet, background updates)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import grpc
import pytest

from agent.kubelet import kubelet_container_config, kubelet_pod_config
from agent.node.agent import NodeAgent
from agent.node.fingerprint import machine_fingerprint
from agent.node.runtime_access import GrpcRuntimeAccess, InProcessRuntimeAccess
from agent.policy.config import PolicyConfig
from agent.relay.backend import BackendError
from agent.relay.hooks import HookAbort
from agent.relay.server import RelayServer
from agent.runtime.inprocess import in_process_forward
from agent.state.store import StateStore
from agent.workload import QoSClass
from devtools.criclient import CRIClient, CRIError
from devtools.fake_runtime import FaultyRuntime as MemoryRuntime
from devtools.fake_runtime import serve_memory_runtime
from proto import cri_pb2
from tests.waiting import LIMIT_S
from topology.tree import Machine

_SERVICE = "/runtime.v1.RuntimeService/"
MODES = ("inprocess", "grpc")


class Kubelet(Protocol):
    """The CRIClient calls the tests make; InProcessKubelet mirrors them."""

    def run_pod_sandbox(self, config: cri_pb2.PodSandboxConfig) -> str: ...
    def stop_pod_sandbox(self, pod_id: str) -> None: ...
    def remove_pod_sandbox(self, pod_id: str) -> None: ...
    def create_container(
        self, pod_id: str, config: cri_pb2.ContainerConfig, sandbox_config: cri_pb2.PodSandboxConfig
    ) -> str: ...
    def start_container(self, container_id: str) -> None: ...
    def stop_container(self, container_id: str) -> None: ...
    def remove_container(self, container_id: str) -> None: ...
    def list_containers(self) -> list[cri_pb2.Container]: ...
    def container_status(self, container_id: str) -> cri_pb2.ContainerStatusResponse: ...
    def update_container_resources(
        self, container_id: str, linux: cri_pb2.LinuxContainerResources
    ) -> None: ...


class InProcessKubelet:
    """kubelet's calls through the agent's handlers with the runtime as `forward`;
    refusals and runtime errors come out as CRIError, as from CRIClient."""

    def __init__(self, agent: NodeAgent, runtime: MemoryRuntime) -> None:
        self.handlers = agent.handlers()
        self.runtime = runtime

    def _call(self, rpc: str, request: Any, reply_type: Any) -> Any:
        method = _SERVICE + rpc
        forward = in_process_forward(self.runtime, method)
        handler = self.handlers.get(method)
        try:
            raw = (
                handler(request.SerializeToString(), forward)
                if handler
                else forward(request.SerializeToString())
            )
        except (HookAbort, BackendError) as err:
            raise CRIError(rpc, err.code, err.details) from err
        return reply_type.FromString(raw)

    def run_pod_sandbox(self, config: cri_pb2.PodSandboxConfig) -> str:
        reply = self._call(
            "RunPodSandbox",
            cri_pb2.RunPodSandboxRequest(config=config),
            cri_pb2.RunPodSandboxResponse,
        )
        return str(reply.pod_sandbox_id)

    def stop_pod_sandbox(self, pod_id: str) -> None:
        self._call(
            "StopPodSandbox",
            cri_pb2.StopPodSandboxRequest(pod_sandbox_id=pod_id),
            cri_pb2.StopPodSandboxResponse,
        )

    def remove_pod_sandbox(self, pod_id: str) -> None:
        self._call(
            "RemovePodSandbox",
            cri_pb2.RemovePodSandboxRequest(pod_sandbox_id=pod_id),
            cri_pb2.RemovePodSandboxResponse,
        )

    def create_container(
        self, pod_id: str, config: cri_pb2.ContainerConfig, sandbox_config: cri_pb2.PodSandboxConfig
    ) -> str:
        reply = self._call(
            "CreateContainer",
            cri_pb2.CreateContainerRequest(
                pod_sandbox_id=pod_id, config=config, sandbox_config=sandbox_config
            ),
            cri_pb2.CreateContainerResponse,
        )
        return str(reply.container_id)

    def start_container(self, container_id: str) -> None:
        self._call(
            "StartContainer",
            cri_pb2.StartContainerRequest(container_id=container_id),
            cri_pb2.StartContainerResponse,
        )

    def stop_container(self, container_id: str) -> None:
        self._call(
            "StopContainer",
            cri_pb2.StopContainerRequest(container_id=container_id),
            cri_pb2.StopContainerResponse,
        )

    def remove_container(self, container_id: str) -> None:
        self._call(
            "RemoveContainer",
            cri_pb2.RemoveContainerRequest(container_id=container_id),
            cri_pb2.RemoveContainerResponse,
        )

    def list_containers(self) -> list[cri_pb2.Container]:
        reply = self._call(
            "ListContainers", cri_pb2.ListContainersRequest(), cri_pb2.ListContainersResponse
        )
        return list(reply.containers)

    def container_status(self, container_id: str) -> cri_pb2.ContainerStatusResponse:
        reply: cri_pb2.ContainerStatusResponse = self._call(
            "ContainerStatus",
            cri_pb2.ContainerStatusRequest(container_id=container_id),
            cri_pb2.ContainerStatusResponse,
        )
        return reply

    def update_container_resources(
        self, container_id: str, linux: cri_pb2.LinuxContainerResources
    ) -> None:
        self._call(
            "UpdateContainerResources",
            cri_pb2.UpdateContainerResourcesRequest(container_id=container_id, linux=linux),
            cri_pb2.UpdateContainerResourcesResponse,
        )


@dataclass
class Node:
    agent: NodeAgent
    runtime: MemoryRuntime
    kubelet: Kubelet
    machine: Machine
    pods: dict[str, cri_pb2.PodSandboxConfig] = field(default_factory=dict)

    def pod(
        self,
        name: str,
        qos: QoSClass = QoSClass.BESTEFFORT,
        annotations: Mapping[str, str] | None = None,
        namespace: str = "default",
        labels: Mapping[str, str] | None = None,
    ) -> str:
        config = kubelet_pod_config(
            name, namespace, f"uid-{name}", labels=labels, annotations=annotations, qos=qos
        )
        sandbox_id = self.kubelet.run_pod_sandbox(config)
        self.pods[sandbox_id] = config
        return sandbox_id

    def container(
        self,
        sandbox_id: str,
        name: str,
        milli: int = 0,
        limit: int = 0,
        *,
        start: bool = True,
        memory: int = 0,
        cpuset_cpus: str = "",
        attempt: int = 0,
    ) -> str:
        pod = self.pods[sandbox_id]
        config = kubelet_container_config(
            pod, name, milli, limit, memory, cpuset_cpus=cpuset_cpus, attempt=attempt
        )
        cid = self.kubelet.create_container(sandbox_id, config, pod)
        if start:
            self.kubelet.start_container(cid)
        return cid

    def guaranteed(self, name: str, cpus: int, **kw: Any) -> tuple[str, str]:
        sandbox_id = self.pod(name, QoSClass.GUARANTEED, **kw)
        cid = self.container(sandbox_id, name, cpus * 1000, cpus * 1000, memory=1 << 30)
        return sandbox_id, cid

    def linux(self, cid: str) -> cri_pb2.LinuxContainerResources:
        """What the runtime holds for the container."""
        status = self.runtime.container_status(cri_pb2.ContainerStatusRequest(container_id=cid))
        return status.status.resources.linux

    def cpus(self, cid: str) -> str:
        return str(self.linux(cid).cpuset_cpus)

    def mems(self, cid: str) -> str:
        return str(self.linux(cid).cpuset_mems)

    def settle(self) -> None:
        assert self.agent.wait_for_updates(LIMIT_S), f"{self.agent.pending_updates()} updates owed"

    def calls(self, rpc: str) -> list[Any]:
        return [c.request for c in self.runtime.calls if c.method == rpc]


@pytest.fixture
def sockdir() -> Iterator[Path]:
    # pytest's tmp_path can exceed the 107-byte unix socket path limit.
    with tempfile.TemporaryDirectory(prefix="na-node-", dir="/tmp") as d:
        yield Path(d)


NodeFactory = Callable[..., Node]


@pytest.fixture
def make_node(machines: Callable[[str], Machine], sockdir: Path) -> Iterator[NodeFactory]:
    """make_node(shape, mode, runtime=None, state_dir=None, **policy_config) -> Node."""
    cleanups: list[Callable[[], None]] = []
    counter = iter(range(1000))

    def make(
        shape: str,
        mode: str,
        *,
        runtime: MemoryRuntime | None = None,
        state_dir: Path | None = None,
        start: bool = True,
        **config: object,
    ) -> Node:
        machine = machines(shape)
        policy_config = PolicyConfig.from_mapping(config)
        store = StateStore(state_dir, machine_fingerprint(machine)) if state_dir else None
        n = next(counter)
        if mode == "inprocess":
            runtime = runtime or MemoryRuntime()
            agent = NodeAgent(machine, policy_config, InProcessRuntimeAccess(runtime), store=store)
            cleanups.append(agent.close)
            node = Node(agent, runtime, InProcessKubelet(agent, runtime), machine)
        else:
            rt_path = sockdir / f"rt{n}.sock"
            server, runtime = serve_memory_runtime(rt_path, runtime)
            cleanups.append(lambda: server.stop(None))
            access = GrpcRuntimeAccess(f"unix://{rt_path}", timeout=5)
            cleanups.append(access.close)
            agent = NodeAgent(machine, policy_config, access, store=store, background_updates=True)
            cleanups.append(agent.close)
            relay = RelayServer(
                str(sockdir / f"agent{n}.sock"), f"unix://{rt_path}", hooks=agent.relay_hooks()
            )
            relay.start()
            cleanups.append(lambda: relay.stop(0))
            client = CRIClient(relay.path, timeout=5)
            cleanups.append(client.close)
            node = Node(agent, runtime, client, machine)
        if start:
            agent.start()
        return node

    yield make
    for cleanup in reversed(cleanups):
        cleanup()


def code_of(err: pytest.ExceptionInfo[CRIError]) -> grpc.StatusCode:
    return err.value.code
