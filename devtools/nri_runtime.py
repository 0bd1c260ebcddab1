"""A container runtime's NRI side, in Python, for tests and benchmarks: it listens
on a unix socket as containerd does, lets one plugin register, configures and
synchronizes it, and sends it the pod and container events a runtime would,
applying the adjustments and updates the plugin answers with.

It speaks the protocol over a real socket with the agent's own framing code
(agent/nri/connection.py, the mirror image: it serves the runtime's logical
connection and calls the plugin's). Pods and containers are given in kubelet's
CRI shape (agent.kubelet builders) and turned into NRI's messages as containerd
does: labels, annotations, cgroup parent and resources.
"""

from __future__ import annotations

import itertools
import os
import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from google.protobuf.message import Message

from agent.nri import methods, mux
from agent.nri.connection import Connection, RpcError
from proto import cri_pb2, nri_pb2

REQUEST_TIMEOUT_S = 2.0
_M = TypeVar("_M", bound=Message)
_ids = itertools.count(1)


def _new_id(prefix: str) -> str:
    return f"{prefix}{next(_ids):06d}{os.urandom(4).hex()}"


def nri_resources(linux: cri_pb2.LinuxContainerResources) -> nri_pb2.LinuxResources:
    res = nri_pb2.LinuxResources(
        cpu=nri_pb2.LinuxCPU(cpus=linux.cpuset_cpus, mems=linux.cpuset_mems)
    )
    if linux.cpu_shares:
        res.cpu.shares.value = linux.cpu_shares
    if linux.cpu_quota:
        res.cpu.quota.value = linux.cpu_quota
    if linux.cpu_period:
        res.cpu.period.value = linux.cpu_period
    if linux.memory_limit_in_bytes:
        res.memory.limit.value = linux.memory_limit_in_bytes
    return res


def apply_resources(target: nri_pb2.LinuxResources, change: nri_pb2.LinuxResources) -> None:
    """What NRI does with an adjustment or update: the fields set replace, the rest stay."""
    if change.cpu.cpus:
        target.cpu.cpus = change.cpu.cpus
    if change.cpu.mems:
        target.cpu.mems = change.cpu.mems
    for name in ("shares", "quota", "period"):
        if change.cpu.HasField(name):
            getattr(target.cpu, name).CopyFrom(getattr(change.cpu, name))
    if change.memory.HasField("limit"):
        target.memory.limit.CopyFrom(change.memory.limit)


@dataclass(slots=True)
class Recorded:
    """What the plugin sent the runtime, for assertions."""

    registrations: list[nri_pb2.RegisterPluginRequest] = field(default_factory=list)
    unsolicited: list[nri_pb2.UpdateContainersRequest] = field(default_factory=list)
    synchronize_updates: list[nri_pb2.ContainerUpdate] = field(default_factory=list)
    # Seconds each plugin call took as the runtime saw it (request sent -> reply read).
    seconds: dict[str, list[float]] = field(default_factory=dict)


class NriRuntimeStandIn:
    """The runtime end of one NRI socket. Use as a context manager."""

    def __init__(
        self,
        socket_path: str | Path,
        *,
        nri_version: str = "v0.12.0",
        runtime_name: str = "standin",
        runtime_version: str = "v2.3.4",
        sync_chunk: int = 0,  # containers per Synchronize message; 0: all in one
        request_timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> None:
        self.path = str(socket_path)
        self.nri_version = nri_version
        self.runtime_name = runtime_name
        self.runtime_version = runtime_version
        self.sync_chunk = sync_chunk
        self.timeout = request_timeout_s
        self.pods: dict[str, nri_pb2.PodSandbox] = {}
        self.containers: dict[str, nri_pb2.Container] = {}
        self.recorded = Recorded()
        self.events = 0
        self.configure_error: RpcError | None = None
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._conn: Connection | None = None
        self._ready = threading.Event()
        self._registered = threading.Event()
        self._stopping = False
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(4)
        self._accepter = threading.Thread(target=self._accept, name="nri-standin", daemon=True)
        self._accepter.start()

    def __enter__(self) -> NriRuntimeStandIn:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stopping = True
        self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self.disconnect()
        self._accepter.join(5)
        Path(self.path).unlink(missing_ok=True)

    def disconnect(self) -> None:
        """Drop the plugin's connection, as a runtime restart does."""
        self._ready.clear()
        self._registered.clear()
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close("the runtime stand-in dropped the plugin")
            conn.join()

    # -- connection set-up ------------------------------------------------------------

    def _accept(self) -> None:
        while not self._stopping:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            conn = Connection(
                sock,
                self._serve,
                serve_on=mux.RUNTIME_SERVICE_CONN,
                call_on=mux.PLUGIN_SERVICE_CONN,
            )
            old, self._conn = self._conn, conn
            if old is not None:
                old.close("replaced by a new plugin connection")
            conn.start()
            threading.Thread(target=self._set_up, args=(conn,), daemon=True).start()

    def _set_up(self, conn: Connection) -> None:
        if not self._registered.wait(10):
            conn.close("the plugin did not register")
            return
        configure = nri_pb2.ConfigureRequest(
            runtime_name=self.runtime_name,
            runtime_version=self.runtime_version,
            registration_timeout=5000,
            request_timeout=int(self.timeout * 1000),
            NRI_version=self.nri_version,
        )
        try:
            raw = conn.call(
                methods.PLUGIN_SERVICE, "Configure", configure.SerializeToString(), self.timeout
            )
        except RpcError as err:
            self.configure_error = err
            conn.close(f"configuration failed: {err}")
            self._ready.set()
            return
        self.events = nri_pb2.ConfigureResponse.FromString(raw).events
        self._synchronize(conn)
        self._ready.set()

    def _synchronize(self, conn: Connection) -> None:
        with self._lock:
            pods = list(self.pods.values())
            containers = list(self.containers.values())
        chunk = self.sync_chunk or max(len(containers), 1)
        parts = [containers[i : i + chunk] for i in range(0, len(containers), chunk)] or [[]]
        for n, part in enumerate(parts):
            last = n == len(parts) - 1
            request = nri_pb2.SynchronizeRequest(
                pods=pods if n == 0 else [], containers=part, more=not last
            )
            began = time.perf_counter()
            raw = conn.call(
                methods.PLUGIN_SERVICE, "Synchronize", request.SerializeToString(), self.timeout
            )
            self.recorded.seconds.setdefault("Synchronize", []).append(time.perf_counter() - began)
            reply = nri_pb2.SynchronizeResponse.FromString(raw)
            self.recorded.synchronize_updates.extend(reply.update)
            self._apply_updates(reply.update)

    def wait_ready(self, timeout: float = 10.0) -> bool:
        """Until a plugin registered, was configured and synchronized (or refused)."""
        return self._ready.wait(timeout)

    def _serve(self, service: str, method: str, payload: bytes) -> bytes:
        if service != methods.RUNTIME_SERVICE:
            raise RpcError(12, f"unknown service {service}")
        if method == methods.REGISTER_PLUGIN:
            self.recorded.registrations.append(nri_pb2.RegisterPluginRequest.FromString(payload))
            self._registered.set()
            return nri_pb2.Empty().SerializeToString()
        if method == methods.UPDATE_CONTAINERS:
            request = nri_pb2.UpdateContainersRequest.FromString(payload)
            failed = self._apply_updates(request.update)
            with self._lock:
                self.recorded.unsolicited.append(request)
                self._changed.notify_all()
            return nri_pb2.UpdateContainersResponse(failed=failed).SerializeToString()
        raise RpcError(12, f"unknown method {method}")

    def wait_unsolicited(self, count: int, timeout: float = 10.0) -> bool:
        with self._lock:
            return self._changed.wait_for(lambda: len(self.recorded.unsolicited) >= count, timeout)

    def _apply_updates(
        self, updates: Iterable[nri_pb2.ContainerUpdate]
    ) -> list[nri_pb2.ContainerUpdate]:
        failed = []
        with self._lock:
            for update in updates:
                ctr = self.containers.get(update.container_id)
                if ctr is None or ctr.state == nri_pb2.CONTAINER_STOPPED:
                    failed.append(update)
                    continue
                apply_resources(ctr.linux.resources, update.linux.resources)
        return failed

    # -- what a runtime does for kubelet ----------------------------------------------

    def _subscribed(self, event: int) -> bool:
        return bool(self.events & (1 << (event - 1)))

    def _call(self, method: str, request: Message, reply_type: type[_M]) -> _M:
        conn = self._conn
        if conn is None:
            raise RpcError(14, "no plugin connected")
        began = time.perf_counter()
        try:  # a refusal's time counts too: the runtime waited for it
            raw = conn.call(
                methods.PLUGIN_SERVICE, method, request.SerializeToString(), self.timeout
            )
        finally:
            self.recorded.seconds.setdefault(method, []).append(time.perf_counter() - began)
        return reply_type.FromString(raw)

    def run_pod(self, config: cri_pb2.PodSandboxConfig) -> str:
        md = config.metadata
        pod = nri_pb2.PodSandbox(
            id=_new_id("pod"),
            name=md.name,
            uid=md.uid,
            namespace=md.namespace,
            labels=dict(config.labels),
            annotations=dict(config.annotations),
            linux=nri_pb2.LinuxPodSandbox(cgroup_parent=config.linux.cgroup_parent),
        )
        with self._lock:
            self.pods[pod.id] = pod
        if self._subscribed(nri_pb2.RUN_POD_SANDBOX):
            self._call("RunPodSandbox", nri_pb2.RunPodSandboxRequest(pod=pod), nri_pb2.Empty)
        return pod.id

    def create_container(self, pod_id: str, config: cri_pb2.ContainerConfig) -> str:
        """CreateContainer as the runtime asks it; RpcError when the plugin refuses."""
        pod = self.pods[pod_id]
        ctr = nri_pb2.Container(
            id=_new_id("ctr"),
            pod_sandbox_id=pod_id,
            name=config.metadata.name,
            state=nri_pb2.CONTAINER_UNKNOWN,
            labels=dict(config.labels),
            annotations=dict(config.annotations),
            linux=nri_pb2.LinuxContainer(resources=nri_resources(config.linux.resources)),
        )
        if self._subscribed(nri_pb2.CREATE_CONTAINER):
            reply = self._call(
                "CreateContainer",
                nri_pb2.CreateContainerRequest(pod=pod, container=ctr),
                nri_pb2.CreateContainerResponse,
            )
            apply_resources(ctr.linux.resources, reply.adjust.linux.resources)
            self._apply_updates(reply.update)
        ctr.state = nri_pb2.CONTAINER_CREATED
        with self._lock:
            self.containers[ctr.id] = ctr
        return ctr.id

    def start_container(self, container_id: str, pid: int = 0) -> None:
        with self._lock:
            ctr = self.containers[container_id]
            ctr.state = nri_pb2.CONTAINER_RUNNING
            ctr.pid = pid
        if self._subscribed(nri_pb2.POST_START_CONTAINER):
            self._call(
                "PostStartContainer",
                nri_pb2.CreateContainerRequest(pod=self.pods[ctr.pod_sandbox_id], container=ctr),
                nri_pb2.Empty,
            )

    def update_container(self, container_id: str, linux: cri_pb2.LinuxContainerResources) -> None:
        ctr = self.containers[container_id]
        wanted = nri_resources(linux)
        if self._subscribed(nri_pb2.UPDATE_CONTAINER):
            reply = self._call(
                "UpdateContainer",
                nri_pb2.UpdateContainerRequest(
                    pod=self.pods[ctr.pod_sandbox_id], container=ctr, linux_resources=wanted
                ),
                nri_pb2.UpdateContainerResponse,
            )
            mine = [u for u in reply.update if u.container_id == container_id]
            for update in mine:
                apply_resources(wanted, update.linux.resources)
            self._apply_updates([u for u in reply.update if u.container_id != container_id])
        with self._lock:
            apply_resources(ctr.linux.resources, wanted)

    def stop_container(self, container_id: str) -> None:
        with self._lock:
            ctr = self.containers[container_id]
            ctr.state = nri_pb2.CONTAINER_STOPPED
        if self._subscribed(nri_pb2.STOP_CONTAINER):
            reply = self._call(
                "StopContainer",
                nri_pb2.StopContainerRequest(pod=self.pods[ctr.pod_sandbox_id], container=ctr),
                nri_pb2.StopContainerResponse,
            )
            self._apply_updates(reply.update)

    def remove_container(self, container_id: str) -> None:
        with self._lock:
            ctr = self.containers.pop(container_id)
        if self._subscribed(nri_pb2.REMOVE_CONTAINER):
            self._call(
                "RemoveContainer",
                nri_pb2.RemoveContainerRequest(pod=self.pods[ctr.pod_sandbox_id], container=ctr),
                nri_pb2.Empty,
            )

    def stop_pod(self, pod_id: str) -> None:
        for cid in [c.id for c in self.containers.values() if c.pod_sandbox_id == pod_id]:
            if self.containers[cid].state != nri_pb2.CONTAINER_STOPPED:
                self.stop_container(cid)
        if self._subscribed(nri_pb2.STOP_POD_SANDBOX):
            self._call(
                "StopPodSandbox",
                nri_pb2.StopPodSandboxRequest(pod=self.pods[pod_id]),
                nri_pb2.Empty,
            )

    def remove_pod(self, pod_id: str) -> None:
        """As containerd's RemovePodSandbox: containers still running are stopped first."""
        for cid in [c.id for c in self.containers.values() if c.pod_sandbox_id == pod_id]:
            if self.containers[cid].state != nri_pb2.CONTAINER_STOPPED:
                self.stop_container(cid)
            self.remove_container(cid)
        pod = self.pods.pop(pod_id)
        if self._subscribed(nri_pb2.REMOVE_POD_SANDBOX):
            self._call("RemovePodSandbox", nri_pb2.RemovePodSandboxRequest(pod=pod), nri_pb2.Empty)

    def cpus(self, container_id: str) -> str:
        with self._lock:
            return self.containers[container_id].linux.resources.cpu.cpus
