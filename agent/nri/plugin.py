"""The plugin's service: NRI's requests turned into the CRI requests the node
agent's handlers take, so both front doors share one agent (agent/node/agent.py).

Each handler gets a `forward` that stands in for the runtime: it keeps the
request as the agent modified it (the cpusets it chose) and answers as the
runtime would (CreateContainer with NRI's container id). What the agent wrote
becomes the reply's adjustment; what it owes other containers becomes the
reply's updates (runtime.py). A refusal is a ttrpc error with the proxy's
message: the runtime fails the container's creation with it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError, Message

from agent.node import agent as node_agent
from agent.node.agent import NodeAgent
from agent.nri import convert, methods
from agent.nri.connection import RpcError
from agent.nri.runtime import NriRuntime, latest
from agent.relay.backend import BackendError
from agent.relay.hooks import HookAbort
from proto import cri_pb2, nri_pb2

log = logging.getLogger(__name__)

Handle = Callable[[bytes], Message]


def _code(code: grpc.StatusCode) -> int:
    value: int = code.value[0]
    return value


class NriPlugin:
    """The plugin service over one node agent. `serve` is the connection's callback."""

    def __init__(
        self,
        node: NodeAgent,
        runtime: NriRuntime,
        on_synchronized: Callable[[], None] | None = None,
    ) -> None:
        self._node = node
        self._runtime = runtime
        self._handlers = node.handlers()
        self._on_synchronized = on_synchronized
        self._synced = threading.Condition()
        self.synchronizations = 0  # how many Synchronize rounds have finished
        self._sync_pods: list[nri_pb2.PodSandbox] = []
        self._sync_containers: list[nri_pb2.Container] = []
        self.runtime_name = ""
        self.runtime_version = ""
        self.request_timeout_ms = 0
        self._table: dict[str, tuple[type[Message], Callable[[Any], Message]]] = {
            "Configure": (nri_pb2.ConfigureRequest, self._configure),
            "Synchronize": (nri_pb2.SynchronizeRequest, self._synchronize),
            "Shutdown": (nri_pb2.Empty, self._shutdown),
            "RunPodSandbox": (nri_pb2.RunPodSandboxRequest, self._run_pod),
            "StopPodSandbox": (nri_pb2.StopPodSandboxRequest, self._stop_pod),
            "RemovePodSandbox": (nri_pb2.RemovePodSandboxRequest, self._remove_pod),
            "CreateContainer": (nri_pb2.CreateContainerRequest, self._create),
            "PostStartContainer": (nri_pb2.CreateContainerRequest, self._post_start),
            "UpdateContainer": (nri_pb2.UpdateContainerRequest, self._update),
            "StopContainer": (nri_pb2.StopContainerRequest, self._stop),
            "RemoveContainer": (nri_pb2.RemoveContainerRequest, self._remove),
            "StateChange": (nri_pb2.StateChangeEvent, self._state_change),
        }

    def wait_synchronized(self, count: int = 1, timeout: float = 10.0) -> bool:
        """Until `count` Synchronize rounds have finished (True) or `timeout` passes."""
        with self._synced:
            return self._synced.wait_for(lambda: self.synchronizations >= count, timeout)

    def serve(self, service: str, method: str, payload: bytes) -> bytes:
        entry = self._table.get(method) if service == methods.PLUGIN_SERVICE else None
        if entry is None:
            raise RpcError(
                _code(grpc.StatusCode.UNIMPLEMENTED), f"{service}/{method} is not implemented"
            )
        kind, handle = entry
        try:
            request = kind.FromString(payload)
        except DecodeError as err:
            raise RpcError(
                _code(grpc.StatusCode.INVALID_ARGUMENT),
                f"malformed {kind.DESCRIPTOR.full_name} ({len(payload)} bytes): {err}",
            ) from err
        return handle(request).SerializeToString()

    def _call(self, method: str, request: Message, reply: Message) -> Message:
        """The node agent's CRI handler for `method`, the runtime stood in for by a
        forward that keeps the modified request and answers `reply`."""
        kept: list[bytes] = []

        def forward(modified: bytes) -> bytes:
            kept.append(modified)
            return reply.SerializeToString()

        try:
            self._handlers[method](request.SerializeToString(), forward)
        except HookAbort as err:
            raise RpcError(_code(err.code), err.details) from err
        out = type(request)()
        if kept:
            out.MergeFromString(kept[-1])
        return out

    # -- connection set-up ------------------------------------------------------------

    def _configure(self, req: nri_pb2.ConfigureRequest) -> nri_pb2.ConfigureResponse:
        runtime = f"{req.runtime_name} {req.runtime_version}".strip() or "the runtime"
        try:
            version = methods.check_version(runtime, req.NRI_version)
        except methods.UnsupportedVersion as err:
            log.error("refusing NRI runtime: %s", err)
            raise RpcError(_code(grpc.StatusCode.FAILED_PRECONDITION), str(err)) from err
        self.runtime_name, self.runtime_version = req.runtime_name, req.runtime_version
        self.request_timeout_ms = req.request_timeout
        log.info(
            "configured by %s (NRI %s; request timeout %d ms)",
            runtime,
            version,
            req.request_timeout,
        )
        return nri_pb2.ConfigureResponse(events=methods.event_mask())

    def _synchronize(self, req: nri_pb2.SynchronizeRequest) -> nri_pb2.SynchronizeResponse:
        self._sync_pods.extend(req.pods)
        self._sync_containers.extend(req.containers)
        if req.more:
            return nri_pb2.SynchronizeResponse(more=True)
        pods, containers = self._sync_pods, self._sync_containers
        self._sync_pods, self._sync_containers = [], []
        self._runtime.synchronized(pods, containers)
        with self._runtime.collecting() as updates:
            # The proxy's start: restore from the state file, adopt what it lacks.
            self._node.start()
        log.info(
            "synchronized: %d pods, %d containers; %d updates owed",
            len(pods),
            len(containers),
            len(updates),
        )
        with self._synced:
            self.synchronizations += 1
            self._synced.notify_all()
        if self._on_synchronized is not None:
            self._on_synchronized()
        return nri_pb2.SynchronizeResponse(update=latest(updates))

    def _shutdown(self, _req: nri_pb2.Empty) -> nri_pb2.Empty:
        log.info("the runtime is shutting the plugin down")
        return nri_pb2.Empty()

    # -- pods ------------------------------------------------------------------------------

    def _run_pod(self, req: nri_pb2.RunPodSandboxRequest) -> nri_pb2.RunPodSandboxResponse:
        self._runtime.saw_pod(req.pod)
        self._call(
            node_agent.RUN_POD_SANDBOX,
            convert.run_pod_request(req.pod),
            cri_pb2.RunPodSandboxResponse(pod_sandbox_id=req.pod.id),
        )
        return nri_pb2.RunPodSandboxResponse()

    def _stop_pod(self, req: nri_pb2.StopPodSandboxRequest) -> nri_pb2.StopPodSandboxResponse:
        self._call(
            node_agent.STOP_POD_SANDBOX,
            cri_pb2.StopPodSandboxRequest(pod_sandbox_id=req.pod.id),
            cri_pb2.StopPodSandboxResponse(),
        )
        return nri_pb2.StopPodSandboxResponse()

    def _remove_pod(self, req: nri_pb2.RemovePodSandboxRequest) -> nri_pb2.RemovePodSandboxResponse:
        self._call(
            node_agent.REMOVE_POD_SANDBOX,
            cri_pb2.RemovePodSandboxRequest(pod_sandbox_id=req.pod.id),
            cri_pb2.RemovePodSandboxResponse(),
        )
        self._runtime.forget_pod(req.pod.id)
        return nri_pb2.RemovePodSandboxResponse()

    # -- containers -----------------------------------------------------------------------

    def _create(self, req: nri_pb2.CreateContainerRequest) -> nri_pb2.CreateContainerResponse:
        if req.pod.id:
            self._runtime.saw_pod(req.pod)
        with self._runtime.collecting() as updates:
            created = self._call(
                node_agent.CREATE_CONTAINER,
                convert.create_request(req.pod, req.container),
                cri_pb2.CreateContainerResponse(container_id=req.container.id),
            )
        assert isinstance(created, cri_pb2.CreateContainerRequest)
        chosen = created.config.linux.resources
        ctr = nri_pb2.Container()
        ctr.CopyFrom(req.container)
        ctr.state = nri_pb2.CONTAINER_CREATED
        ctr.linux.resources.cpu.cpus = chosen.cpuset_cpus
        ctr.linux.resources.cpu.mems = chosen.cpuset_mems
        self._runtime.saw_container(ctr)
        reply = nri_pb2.CreateContainerResponse(
            update=[u for u in latest(updates) if u.container_id != req.container.id]
        )
        if chosen.cpuset_cpus or chosen.cpuset_mems:
            reply.adjust.linux.resources.CopyFrom(
                convert.nri_cpusets(chosen.cpuset_cpus, chosen.cpuset_mems)
            )
        return reply

    def _post_start(self, req: nri_pb2.CreateContainerRequest) -> nri_pb2.Empty:
        # PostStartContainerRequest has CreateContainerRequest's fields (pod=1, container=2).
        ctr = nri_pb2.Container()
        ctr.CopyFrom(req.container)
        ctr.state = nri_pb2.CONTAINER_RUNNING
        self._runtime.saw_container(_keep_cpusets(self._runtime, ctr))
        return nri_pb2.Empty()

    def _update(self, req: nri_pb2.UpdateContainerRequest) -> nri_pb2.UpdateContainerResponse:
        cid = req.container.id
        with self._runtime.collecting() as updates:
            updated = self._call(
                node_agent.UPDATE_CONTAINER_RESOURCES,
                cri_pb2.UpdateContainerResourcesRequest(
                    container_id=cid, linux=convert.cri_resources(req.linux_resources)
                ),
                cri_pb2.UpdateContainerResourcesResponse(),
            )
        assert isinstance(updated, cri_pb2.UpdateContainerResourcesRequest)
        reply = nri_pb2.UpdateContainerResponse(update=latest(updates))
        mine = updated.linux
        if (mine.cpuset_cpus or mine.cpuset_mems) and (
            mine.cpuset_cpus != req.linux_resources.cpu.cpus
            or mine.cpuset_mems != req.linux_resources.cpu.mems
        ):
            reply.update.add(
                container_id=cid,
                linux=nri_pb2.LinuxContainerUpdate(
                    resources=convert.nri_cpusets(mine.cpuset_cpus, mine.cpuset_mems)
                ),
            )
        return reply

    def _stop(self, req: nri_pb2.StopContainerRequest) -> nri_pb2.StopContainerResponse:
        ctr = nri_pb2.Container()
        ctr.CopyFrom(req.container)
        ctr.state = nri_pb2.CONTAINER_STOPPED
        self._runtime.saw_container(ctr)
        with self._runtime.collecting() as updates:
            self._call(
                node_agent.STOP_CONTAINER,
                cri_pb2.StopContainerRequest(container_id=req.container.id),
                cri_pb2.StopContainerResponse(),
            )
        return nri_pb2.StopContainerResponse(
            update=[u for u in latest(updates) if u.container_id != req.container.id]
        )

    def _remove(self, req: nri_pb2.RemoveContainerRequest) -> nri_pb2.RemoveContainerResponse:
        self._runtime.forget_container(req.container.id)
        self._call(
            node_agent.REMOVE_CONTAINER,
            cri_pb2.RemoveContainerRequest(container_id=req.container.id),
            cri_pb2.RemoveContainerResponse(),
        )
        return nri_pb2.RemoveContainerResponse()

    def _state_change(self, req: nri_pb2.StateChangeEvent) -> nri_pb2.Empty:
        """Runtimes before NRI v0.9 send pod and removal events here."""
        if req.event == nri_pb2.RUN_POD_SANDBOX:
            self._run_pod(nri_pb2.RunPodSandboxRequest(pod=req.pod))
        elif req.event == nri_pb2.STOP_POD_SANDBOX:
            self._stop_pod(nri_pb2.StopPodSandboxRequest(pod=req.pod))
        elif req.event == nri_pb2.REMOVE_POD_SANDBOX:
            self._remove_pod(nri_pb2.RemovePodSandboxRequest(pod=req.pod))
        elif req.event == nri_pb2.REMOVE_CONTAINER:
            self._remove(nri_pb2.RemoveContainerRequest(pod=req.pod, container=req.container))
        elif req.event == nri_pb2.POST_START_CONTAINER:
            self._post_start(nri_pb2.CreateContainerRequest(pod=req.pod, container=req.container))
        return nri_pb2.Empty()


def _keep_cpusets(runtime: NriRuntime, ctr: nri_pb2.Container) -> nri_pb2.Container:
    """The started container as NRI reports it; its cpusets stay the ones the agent
    last gave it when NRI's report predates them."""
    try:
        known = runtime.container_status(ctr.id).resources.linux
    except BackendError:  # not known: keep NRI's report
        return ctr
    if known.cpuset_cpus and not ctr.linux.resources.cpu.cpus:
        ctr.linux.resources.cpu.cpus = known.cpuset_cpus
        ctr.linux.resources.cpu.mems = known.cpuset_mems
    return ctr
