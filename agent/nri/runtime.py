"""The node agent's runtime in NRI mode: what the runtime last told the plugin
(Synchronize and events) answers the agent's listings, and the agent's cpuset
updates for other containers become NRI ContainerUpdates.

An update made while the runtime waits for a reply that can carry updates
(Synchronize, CreateContainer, UpdateContainer, StopContainer) goes into that
reply (`collecting`); any other (the reconcile, an event with no reply) goes to
the outbox, which the session sends as unsolicited UpdateContainers. Never
waiting for the runtime here matters: containerd holds one lock over a plugin
request and over UpdateContainers, so a handler waiting for its own unsolicited
update would wait until the runtime gives up on the plugin.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterable, Iterator

import grpc

from agent.node.runtime_access import RuntimeAccess
from agent.nri import convert
from agent.relay.backend import BackendError
from agent.relay.endpoint import Endpoint
from proto import cri_pb2, nri_pb2

log = logging.getLogger(__name__)


class NriRuntime:
    """RuntimeAccess over NRI's view. `cri` (the runtime's own CRI socket, when
    reachable) answers only what NRI may not tell: a started container's pid."""

    def __init__(self, socket_path: str = "nri", cri: RuntimeAccess | None = None) -> None:
        self._endpoint = Endpoint.parse(socket_path)
        self._cri = cri
        self._lock = threading.Lock()
        self._pods: dict[str, nri_pb2.PodSandbox] = {}
        self._containers: dict[str, nri_pb2.Container] = {}
        self._local = threading.local()
        self._outbox: list[nri_pb2.ContainerUpdate] = []
        self._outbox_ready = threading.Condition(self._lock)

    # -- what the runtime tells ------------------------------------------------

    def synchronized(
        self, pods: Iterable[nri_pb2.PodSandbox], containers: Iterable[nri_pb2.Container]
    ) -> None:
        with self._lock:
            self._pods = {p.id: p for p in pods}
            self._containers = {c.id: c for c in containers}
            self._outbox.clear()  # owed updates are worked out again from the listing

    def saw_pod(self, pod: nri_pb2.PodSandbox) -> None:
        with self._lock:
            self._pods[pod.id] = pod

    def forget_pod(self, pod_id: str) -> None:
        with self._lock:
            self._pods.pop(pod_id, None)

    def saw_container(self, ctr: nri_pb2.Container) -> None:
        with self._lock:
            self._containers[ctr.id] = ctr

    def forget_container(self, container_id: str) -> None:
        with self._lock:
            self._containers.pop(container_id, None)

    def counts(self) -> tuple[int, int]:
        with self._lock:
            return len(self._pods), len(self._containers)

    # -- RuntimeAccess ---------------------------------------------------------------

    def list_pod_sandboxes(self) -> list[cri_pb2.PodSandbox]:
        with self._lock:
            pods = list(self._pods.values())
        return [convert.sandbox(p) for p in pods]

    def pod_cgroup_parent(self, sandbox_id: str) -> str:
        """The pod's cgroup parent as NRI reports it (its QoS class); "" if unknown."""
        with self._lock:
            pod = self._pods.get(sandbox_id)
        return "" if pod is None else pod.linux.cgroup_parent

    def list_containers(self, sandbox_id: str = "") -> list[cri_pb2.Container]:
        with self._lock:
            containers = [
                c
                for c in self._containers.values()
                if not sandbox_id or c.pod_sandbox_id == sandbox_id
            ]
        return [convert.container(c) for c in containers]

    def container_status(self, container_id: str) -> cri_pb2.ContainerStatus:
        with self._lock:
            ctr = self._containers.get(container_id)
        if ctr is None:
            raise BackendError(
                "ContainerStatus",
                self._endpoint,
                grpc.StatusCode.NOT_FOUND,
                f"container {container_id} is not known to NRI",
            )
        return convert.status(ctr)

    def container_pid(self, container_id: str) -> int | None:
        with self._lock:
            ctr = self._containers.get(container_id)
        if ctr is not None and ctr.pid > 0:
            return ctr.pid
        if self._cri is None:
            return None
        try:
            return self._cri.container_pid(container_id)
        except BackendError:
            return None

    def update_container_resources(
        self, container_id: str, linux: cri_pb2.LinuxContainerResources
    ) -> None:
        update = nri_pb2.ContainerUpdate(
            container_id=container_id,
            linux=nri_pb2.LinuxContainerUpdate(
                resources=convert.nri_cpusets(linux.cpuset_cpus, linux.cpuset_mems)
            ),
            # Another container may be stopping meanwhile: its failure must not fail
            # the request this update rides on (the reconcile repairs a dropped one).
            ignore_failure=True,
        )
        with self._lock:
            ctr = self._containers.get(container_id)
            if ctr is not None:
                ctr.linux.resources.cpu.cpus = linux.cpuset_cpus
                ctr.linux.resources.cpu.mems = linux.cpuset_mems
            collected: list[nri_pb2.ContainerUpdate] | None = getattr(
                self._local, "collected", None
            )
            if collected is None:
                self._outbox.append(update)
                self._outbox_ready.notify_all()
        if collected is not None:
            collected.append(update)

    # -- where updates go -------------------------------------------------------------

    @contextlib.contextmanager
    def collecting(self) -> Iterator[list[nri_pb2.ContainerUpdate]]:
        """Updates made by this thread inside go into the returned list (the reply)."""
        collected: list[nri_pb2.ContainerUpdate] = []
        self._local.collected = collected
        try:
            yield collected
        finally:
            self._local.collected = None

    def take_outbox(self, timeout: float) -> list[nri_pb2.ContainerUpdate]:
        """The unsolicited updates owed (waiting up to `timeout` for one), latest per container."""
        with self._lock:
            if not self._outbox:
                self._outbox_ready.wait(timeout)
            batch, self._outbox = self._outbox, []
        return latest(batch)

    def wake(self) -> None:
        with self._lock:
            self._outbox_ready.notify_all()


def latest(updates: Iterable[nri_pb2.ContainerUpdate]) -> list[nri_pb2.ContainerUpdate]:
    """One update per container, the last one made, in first-seen order."""
    by_id: dict[str, nri_pb2.ContainerUpdate] = {}
    for update in updates:
        by_id[update.container_id] = update
    return list(by_id.values())
