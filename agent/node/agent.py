"""The node agent: kubelet's CRI calls that matter, turned into policy decisions,
cpusets written into requests, and cpuset updates sent to other containers.

One lock serializes decisions (policy and the agent's books); no runtime call,
forwarded or the agent's own, is ever made while holding it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

import grpc
from google.protobuf.message import DecodeError, Message

from agent.affinity import AnnotationError, effective_affinity, parse_pod_affinities
from agent.kubelet import POD_NAME_LABEL, POD_NAMESPACE_LABEL, POD_UID_LABEL
from agent.node.crashpoints import crash_point
from agent.node.describe import (
    StateFormatError,
    container_from_json,
    container_info,
    container_pod,
    container_to_json,
    linux_from_json,
    linux_to_json,
    pod_from_config,
    pod_from_json,
    pod_from_sandbox,
    pod_to_json,
    resources_of,
)
from agent.node.runtime_access import RuntimeAccess
from agent.node.updates import Updater
from agent.policy.config import PolicyConfig
from agent.policy.policy import (
    CpusetUpdate,
    Decision,
    InvalidRequest,
    PlacementError,
    Policy,
    PoolCapacity,
    ResourceExhausted,
)
from agent.policy.request import AffinityFn, ContainerRequest, CpuKind, Resources, classify
from agent.relay.backend import BackendError
from agent.relay.hooks import Forward, Hook, HookAbort
from agent.state.store import StateError, StateStore
from agent.workload import ContainerInfo, PodInfo, QoSClass
from proto import cri_pb2
from topology.cpuset import CPUSet, CPUSetError
from topology.tree import Machine

log = logging.getLogger(__name__)

_SERVICE = "/runtime.v1.RuntimeService/"
RUN_POD_SANDBOX = _SERVICE + "RunPodSandbox"
STOP_POD_SANDBOX = _SERVICE + "StopPodSandbox"
REMOVE_POD_SANDBOX = _SERVICE + "RemovePodSandbox"
CREATE_CONTAINER = _SERVICE + "CreateContainer"
STOP_CONTAINER = _SERVICE + "StopContainer"
REMOVE_CONTAINER = _SERVICE + "RemoveContainer"
UPDATE_CONTAINER_RESOURCES = _SERVICE + "UpdateContainerResources"
LIST_CONTAINERS = _SERVICE + "ListContainers"
CONTAINER_STATUS = _SERVICE + "ContainerStatus"

STATE_VERSION = 1

# Context-free so `simulate` can call it without gRPC; raises HookAbort, and a
# BackendError from `forward` passes through unchanged.
Handler = Callable[[bytes, Forward], bytes]
OnDecision = Callable[[ContainerInfo, Decision], None]


class PlacementObserver(Protocol):
    """Told of every policy call and refusal (metrics); called with no lock held
    that matters for latency, and must be quick."""

    def decided(self, seconds: float) -> None: ...

    def refused(self, reason: str) -> None: ...  # "invalid_argument", "resource_exhausted", ...


_M = TypeVar("_M", bound=Message)
_LIVE = (cri_pb2.CONTAINER_CREATED, cri_pb2.CONTAINER_RUNNING)


def _decode(kind: type[_M], request: bytes) -> _M:
    """Parse a hooked request before anything else: garbage is the caller's error
    (INVALID_ARGUMENT), never an exception in the relay."""
    try:
        return kind.FromString(request)
    except DecodeError as err:
        raise HookAbort(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"malformed {kind.DESCRIPTOR.full_name} ({len(request)} bytes): {err}",
        ) from err


@dataclass(frozen=True, slots=True)
class Placement:
    """One live container as the agent sees it."""

    namespace: str
    pod: str
    name: str
    container_id: str
    pod_uid: str
    cpuset_cpus: str
    cpuset_mems: str
    exclusive: bool
    pool: str
    score: float = 0.0  # the placement's affinity score when it was placed


@dataclass(slots=True)
class _Tracked:
    """A container the runtime created with the agent's placement."""

    info: ContainerInfo  # with the runtime's id
    linux: cri_pb2.LinuxContainerResources  # full, as last sent, cpusets the agent's
    cpus: CPUSet  # where the agent wants it now
    mems: CPUSet
    pool: str
    exclusive: bool


def _affinity(info: ContainerInfo, rules: tuple[Any, ...]) -> AffinityFn | None:
    if not rules:
        return None
    return lambda other: effective_affinity(info, rules, other)


def _parse_cpuset(text: str, what: str) -> CPUSet:
    try:
        return CPUSet.parse(text)
    except CPUSetError as err:
        log.warning("%s: unreadable cpuset %r (%s); treating it as unset", what, text, err)
        return CPUSet()


def _who(info: ContainerInfo) -> str:
    return f"container {info.name!r} of pod {info.namespace}/{info.pod.name}"


class NodeAgent:
    """Placement on the CRI calls that matter; see handlers() for which.

    Choices worth knowing:
    - A pod whose cgroup parent names no QoS class (not kubelet's layout, or a pod
      listed at start with no parent at all) gets, per container, the class its own
      resources suggest (describe.qos_from_resources): never exclusive CPUs unless
      its CPU limit equals a whole-CPU request.
    - Stopping or removing a sandbox releases the containers of that sandbox id, not
      of the pod UID: an old sandbox of a pod may go while its new one runs.
    - placements() reports the cpusets the agent wants; pending_updates() says how
      many containers the runtime has not yet been told.
    """

    def __init__(
        self,
        machine: Machine,
        config: PolicyConfig,
        runtime: RuntimeAccess,
        *,
        store: StateStore | None = None,
        background_updates: bool = False,
        on_decision: OnDecision | None = None,
        observer: PlacementObserver | None = None,
    ) -> None:
        self.machine = machine
        self.config = config
        self._runtime = runtime
        self._store = store
        self._background = background_updates
        self._on_decision = on_decision
        self._observer = observer
        self._lock = threading.Lock()  # the decision lock
        self._policy = Policy(machine, config)
        self._pods: dict[str, PodInfo] = {}  # by sandbox id
        self._containers: dict[str, _Tracked] = {}  # by container id
        self._updater = Updater(runtime.update_container_resources)
        self._save_lock = threading.Lock()
        self._version = 0  # of the books, bumped under the decision lock
        self._saved = 0
        # JSON for the state file by (kind, sandbox or container id): (source object, json).
        self._json_cache: dict[tuple[str, str], tuple[Any, Any]] = {}
        if background_updates:
            self._updater.start_worker()

    # -- public API ------------------------------------------------------------

    def handlers(self) -> dict[str, Handler]:
        """Full CRI method name -> handler. Other methods are relayed untouched."""
        return {
            RUN_POD_SANDBOX: self._run_pod_sandbox,
            STOP_POD_SANDBOX: self._stop_pod_sandbox,
            REMOVE_POD_SANDBOX: self._remove_pod_sandbox,
            CREATE_CONTAINER: self._create_container,
            STOP_CONTAINER: self._stop_container,
            REMOVE_CONTAINER: self._stop_container,
            UPDATE_CONTAINER_RESOURCES: self._update_container_resources,
            LIST_CONTAINERS: self._list_containers,
            CONTAINER_STATUS: self._container_status,
        }

    def relay_hooks(self) -> dict[str, Hook]:
        def adapt(handler: Handler) -> Hook:
            return lambda request, forward, _context: handler(request, forward)

        return {method: adapt(handler) for method, handler in self.handlers().items()}

    def placements(self) -> list[Placement]:
        with self._lock:
            return self._placements_locked()

    def placements_and_capacity(self) -> tuple[list[Placement], tuple[PoolCapacity, ...]]:
        """Both under one lock acquisition, so a decision cannot land between them."""
        with self._lock:
            return self._placements_locked(), self._policy.capacity()

    def _placements_locked(self) -> list[Placement]:
        items = [
            Placement(
                namespace=t.info.namespace,
                pod=t.info.pod.name,
                name=t.info.name,
                container_id=cid,
                pod_uid=t.info.pod.uid,
                cpuset_cpus=str(t.cpus),
                cpuset_mems=str(t.mems),
                exclusive=t.exclusive,
                pool=t.pool,
                score=self._score(cid),
            )
            for cid, t in self._containers.items()
        ]
        return sorted(items, key=lambda p: (p.namespace, p.pod, p.name, p.container_id))

    def _score(self, cid: str) -> float:
        current = self._policy.current(cid)
        return 0.0 if current is None else current.score

    def pending_updates(self) -> int:
        return self._updater.pending()

    def wait_for_updates(self, timeout: float) -> bool:
        """Until nothing is owed (True) or `timeout` seconds pass (False); background mode."""
        return self._updater.wait_idle(timeout)

    def explain(self, container_id: str) -> str | None:
        """The policy's explanation of where the container is, or None if unknown."""
        with self._lock:
            current = self._policy.current(container_id)
        return None if current is None else current.explanation

    def capacity(self) -> tuple[PoolCapacity, ...]:
        """Each pool's use and free capacity (Policy.capacity), consistent with placements()."""
        with self._lock:
            return self._policy.capacity()

    def close(self) -> None:
        self._updater.stop()
        with self._lock:
            snapshot = self._snapshot()
        self._save(snapshot)

    # -- start: state file + what the runtime runs ----------------------------

    def start(self) -> None:
        """Load the state file, reconcile with what the runtime runs, send what is owed.

        Containers known to the state keep the cpusets the agent recorded; others are
        adopted with what the runtime reports (QoS approximated from their resources,
        as no cgroup parent is listed); containers gone from the runtime are forgotten.
        """
        saved_pods, saved_containers = self._load()
        sandboxes = self._runtime.list_pod_sandboxes()
        statuses: dict[str, tuple[cri_pb2.Container, cri_pb2.ContainerStatus]] = {}
        for ctr in self._runtime.list_containers():
            if ctr.state not in _LIVE:
                continue
            try:
                statuses[ctr.id] = (ctr, self._runtime.container_status(ctr.id))
            except BackendError as err:
                if err.code != grpc.StatusCode.NOT_FOUND:
                    raise
        with self._lock:
            self._pods = {sb.id: saved_pods.get(sb.id) or pod_from_sandbox(sb) for sb in sandboxes}
            self._policy = Policy(self.machine, self.config)
            self._containers.clear()
            entries = [
                self._adoptee(ctr, status, saved_containers.get(ctr.id))
                for ctr, status in statuses.values()
            ]
            # Known before unknown (the state's cpusets are the agent's own), exclusive
            # and then Guaranteed first within each, so exclusive CPUs go back to their owners.
            entries.sort(
                key=lambda e: (
                    not e[0],
                    not e[1].exclusive,
                    e[1].info.qosclass is not QoSClass.GUARANTEED,
                )
            )
            lost = [t for known, t, reported in entries if self._adopt(known, t, reported)]
            # CPUs gone offline, newly reserved or claimed twice: placed again only once
            # every valid claim is in, so they cannot take CPUs another still holds.
            for tracked in lost:
                self._place_again(tracked)
            for cid in self._containers:
                self._want(cid)
            log.info(
                "started with %d pods and %d containers (%d from the state file); %d updates owed",
                len(self._pods),
                len(self._containers),
                sum(1 for e in entries if e[0]),
                self._updater.pending(),
            )
            snapshot = self._snapshot()
        self._save(snapshot)
        self._flush()

    def _load(self) -> tuple[dict[str, PodInfo], dict[str, _Tracked]]:
        if self._store is None:
            return {}, {}
        loaded = self._store.load()
        if loaded.payload is None:
            return {}, {}
        try:
            return self._parse_state(loaded.payload)
        except StateFormatError as err:
            log.warning(
                "state file %s is unusable (%s); rebuilding from the runtime", self._store.path, err
            )
            return {}, {}

    @staticmethod
    def _parse_state(payload: Mapping[str, Any]) -> tuple[dict[str, PodInfo], dict[str, _Tracked]]:
        if payload.get("version") != STATE_VERSION:
            raise StateFormatError(f"version {payload.get('version')!r}, expected {STATE_VERSION}")
        pods_data = payload.get("pods")
        ctrs_data = payload.get("containers")
        if not isinstance(pods_data, dict) or not isinstance(ctrs_data, dict):
            raise StateFormatError("'pods' and 'containers' must be objects")
        pods = {sid: pod_from_json(data, f"pods.{sid}") for sid, data in pods_data.items()}
        containers: dict[str, _Tracked] = {}
        for cid, data in ctrs_data.items():
            where = f"containers.{cid}"
            if not isinstance(data, dict):
                raise StateFormatError(f"{where}: expected an object")
            containers[cid] = _Tracked(
                info=container_from_json(data.get("info"), f"{where}.info"),
                linux=linux_from_json(data.get("resources"), f"{where}.resources"),
                cpus=_parse_cpuset(str(data.get("cpus", "")), f"{where}.cpus"),
                mems=_parse_cpuset(str(data.get("mems", "")), f"{where}.mems"),
                pool=str(data.get("pool", "")),
                exclusive=bool(data.get("exclusive", False)),
            )
        return pods, containers

    def _adoptee(
        self,
        ctr: cri_pb2.Container,
        status: cri_pb2.ContainerStatus,
        saved: _Tracked | None,
    ) -> tuple[bool, _Tracked, cri_pb2.LinuxContainerResources]:
        reported = status.resources.linux
        if saved is not None:
            return True, saved, reported
        res = resources_of(reported)
        pod = self._pods.get(ctr.pod_sandbox_id) or PodInfo(
            uid=ctr.labels.get(POD_UID_LABEL, ""),
            name=ctr.labels.get(POD_NAME_LABEL, ""),
            namespace=ctr.labels.get(POD_NAMESPACE_LABEL, ""),
            qosclass=QoSClass.BESTEFFORT,
            id=ctr.pod_sandbox_id,
        )
        info = replace(
            container_info(ctr.metadata.name, container_pod(pod, res), ctr.labels, ctr.annotations),
            id=ctr.id,
        )
        linux = cri_pb2.LinuxContainerResources()
        linux.CopyFrom(reported)
        what = f"container {ctr.id}"
        tracked = _Tracked(
            info,
            linux,
            _parse_cpuset(reported.cpuset_cpus, what),
            _parse_cpuset(reported.cpuset_mems, what),
            "",
            False,
        )
        return False, tracked, reported

    def _adopt(
        self, known: bool, tracked: _Tracked, reported: cri_pb2.LinuxContainerResources
    ) -> bool:
        """Take the container in where it runs; True if it wants exclusive CPUs but
        cannot keep the ones it has (to be placed again)."""
        cid = tracked.info.id
        request = ContainerRequest(cid, tracked.info, resources_of(tracked.linux))
        try:
            decision = self._policy.adopt(request, tracked.cpus, tracked.mems)
        except PlacementError as err:
            log.error("cannot adopt %s (%s): %s", cid, _who(tracked.info), err)
            return False
        tracked.cpus, tracked.mems = decision.cpus, decision.mems
        tracked.pool, tracked.exclusive = decision.pool, decision.exclusive
        self._containers[cid] = tracked
        self._updater.set_applied(cid, reported.cpuset_cpus, reported.cpuset_mems)
        self._apply(decision.updates)
        log.info(
            "adopted %s %s (%s): cpus %s mems %s",
            "known" if known else "unknown",
            cid,
            _who(tracked.info),
            decision.cpus,
            decision.mems,
        )
        wanted = classify(request, self.config).kind is CpuKind.EXCLUSIVE
        return wanted and not decision.exclusive

    def _place_again(self, tracked: _Tracked) -> None:
        info = tracked.info
        request = ContainerRequest(
            info.id, info, resources_of(tracked.linux), _affinity(info, _rules_or_none(info))
        )
        try:
            decision = self._policy.resize(request)
        except PlacementError as err:
            log.warning(
                "%s (%s) cannot keep its exclusive CPUs and no others are free (%s); "
                "it runs on shared CPUs %s",
                info.id,
                _who(info),
                err,
                tracked.cpus,
            )
            return
        log.warning(
            "%s (%s) cannot keep its CPUs (offline, reserved or taken): placed again on %s",
            info.id,
            _who(info),
            decision.cpus,
        )
        tracked.cpus, tracked.mems = decision.cpus, decision.mems
        tracked.pool, tracked.exclusive = decision.pool, decision.exclusive
        self._apply(decision.updates)

    # -- pods -----------------------------------------------------------------

    def _run_pod_sandbox(self, request: bytes, forward: Forward) -> bytes:
        config = _decode(cri_pb2.RunPodSandboxRequest, request).config
        reply = forward(request)
        sandbox_id = cri_pb2.RunPodSandboxResponse.FromString(reply).pod_sandbox_id
        pod = pod_from_config(sandbox_id, config)
        with self._lock:
            self._pods[sandbox_id] = pod
            snapshot = self._snapshot()
        self._save(snapshot)
        return reply

    def _stop_pod_sandbox(self, request: bytes, forward: Forward) -> bytes:
        sandbox_id = _decode(cri_pb2.StopPodSandboxRequest, request).pod_sandbox_id
        reply = forward(request)
        self._release_sandbox(sandbox_id, forget_pod=False)
        return reply

    def _remove_pod_sandbox(self, request: bytes, forward: Forward) -> bytes:
        sandbox_id = _decode(cri_pb2.RemovePodSandboxRequest, request).pod_sandbox_id
        reply = forward(request)
        self._release_sandbox(sandbox_id, forget_pod=True)
        return reply

    def _release_sandbox(self, sandbox_id: str, *, forget_pod: bool) -> None:
        # By sandbox id, not pod UID: a pod's old sandbox may be removed while the
        # containers of its new sandbox (same UID) run.
        with self._lock:
            keys = [cid for cid, t in self._containers.items() if t.info.pod.id == sandbox_id]
            keys += [k for k in self._policy.assignments() if k.startswith(f"{sandbox_id}/")]
            self._release_locked(keys)
            if forget_pod:
                self._pods.pop(sandbox_id, None)
            snapshot = self._snapshot()
        self._save(snapshot)
        self._flush()

    # -- containers -----------------------------------------------------------

    def _rules(self, info: ContainerInfo, annotations: Mapping[str, str]) -> tuple[Any, ...]:
        try:
            return parse_pod_affinities(annotations).rules_for(info.name)
        except AnnotationError as err:
            raise self._refusal(grpc.StatusCode.INVALID_ARGUMENT, info, err) from err

    def _decide(self, info: ContainerInfo, place: Callable[[], Decision]) -> Decision:
        """Run a policy call (decision lock held), mapping refusals to gRPC codes."""
        start = time.perf_counter()
        try:
            return place()
        except ResourceExhausted as err:
            raise self._refusal(grpc.StatusCode.RESOURCE_EXHAUSTED, info, err) from err
        except InvalidRequest as err:
            raise self._refusal(grpc.StatusCode.INVALID_ARGUMENT, info, err) from err
        except PlacementError as err:
            raise self._refusal(grpc.StatusCode.INTERNAL, info, err) from err
        finally:
            if self._observer is not None:
                self._observer.decided(time.perf_counter() - start)

    def _refusal(self, code: grpc.StatusCode, info: ContainerInfo, err: Exception) -> HookAbort:
        if self._observer is not None:
            self._observer.refused(code.name.lower())
        return HookAbort(code, f"cannot place {_who(info)}: {err}")

    def _report(self, info: ContainerInfo, decision: Decision, what: str) -> None:
        """A decision took effect: log it (fields for JSON logs), then tell on_decision."""
        log.info(
            "%s %s in %s on cpus %s",
            what,
            _who(info),
            decision.pool,
            decision.cpus or "-",
            extra={
                "pod": f"{info.namespace}/{info.pod.name}",
                "container": info.name,
                "container_id": decision.key,
                "pool": decision.pool,
                "cpuset": str(decision.cpus),
                "mems": str(decision.mems),
                "exclusive": decision.exclusive,
                "score": decision.score,
            },
        )
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "scoring of %s:\n%s",
                _who(info),
                decision.explanation,
                extra={"container_id": decision.key, "pool": decision.pool},
            )
        if self._on_decision is not None:
            self._on_decision(info, decision)

    def _write_cpusets(
        self, linux: cri_pb2.LinuxContainerResources, cpus: CPUSet, mems: CPUSet
    ) -> None:
        # Empty means the policy does not pin (pin_cpus / pin_memory off): kubelet's value stays.
        if cpus:
            linux.cpuset_cpus = str(cpus)
        if mems:
            linux.cpuset_mems = str(mems)

    def _create_container(self, request: bytes, forward: Forward) -> bytes:
        req = _decode(cri_pb2.CreateContainerRequest, request)
        config = req.config
        name = config.metadata.name
        sandbox_id = req.pod_sandbox_id
        res = resources_of(config.linux.resources)
        with self._lock:
            known = self._pods.get(sandbox_id)
        pod = known or pod_from_config(sandbox_id, req.sandbox_config)
        annotations = (
            req.sandbox_config.annotations if req.HasField("sandbox_config") else pod.annotations
        )
        info = container_info(name, container_pod(pod, res), config.labels, config.annotations)
        rules = self._rules(info, annotations)
        key = f"{sandbox_id}/{name}/{config.metadata.attempt}"
        creq = ContainerRequest(key, info, res, _affinity(info, rules))
        with self._lock:
            if self._policy.current(key) is not None:
                # kubelet retried while its first call is still in flight: placing
                # again would resize that one's allocation and both would share it.
                raise HookAbort(
                    grpc.StatusCode.ABORTED,
                    f"a CreateContainer for {_who(info)} (attempt {config.metadata.attempt}) "
                    "is already in flight; retry once it has finished",
                )
            decision = self._decide(info, lambda: self._policy.place(creq))
            self._apply(decision.updates)
        crash_point("create-after-decision")
        linux = req.config.linux.resources  # created on first write if kubelet sent none
        self._write_cpusets(linux, decision.cpus, decision.mems)
        try:
            reply = forward(req.SerializeToString())
        except BackendError:
            with self._lock:
                self._release_locked([key])
                snapshot = self._snapshot()
            self._save(snapshot)
            self._flush()
            raise
        crash_point("create-after-runtime")
        cid = cri_pb2.CreateContainerResponse.FromString(reply).container_id
        with self._lock:
            if self._policy.current(key) is None:
                # Its sandbox was stopped while the create was in flight.
                log.info("%s (%s) created after its pod was stopped", cid, _who(info))
                return reply
            self._policy.rekey(key, cid)
            now = self._policy.current(cid)
            assert now is not None
            copy = cri_pb2.LinuxContainerResources()
            copy.CopyFrom(linux)
            placed = replace(info, id=cid)
            self._containers[cid] = _Tracked(
                placed, copy, now.cpus, now.mems, now.pool, now.exclusive
            )
            self._updater.set_applied(cid, linux.cpuset_cpus, linux.cpuset_mems)
            # Moved while in flight (an update addressed to its temporary key): owed now.
            self._want(cid)
            snapshot = self._snapshot()
        self._save(snapshot)
        crash_point("create-after-save")
        self._flush()
        self._report(placed, replace(decision, key=cid), "placed")
        return reply

    def _stop_container(self, request: bytes, forward: Forward) -> bytes:
        # StopContainerRequest and RemoveContainerRequest both carry container_id=1.
        container_id = _decode(cri_pb2.RemoveContainerRequest, request).container_id
        reply = forward(request)
        crash_point("remove-after-runtime")
        self._release([container_id])
        return reply

    def _release(self, container_ids: Iterable[str]) -> None:
        with self._lock:
            self._release_locked(container_ids)
            snapshot = self._snapshot()
        self._save(snapshot)
        self._flush()

    def _release_locked(self, keys: Iterable[str]) -> None:
        updates: list[CpusetUpdate] = []
        for key in keys:
            updates.extend(self._policy.release(key))
            if self._containers.pop(key, None) is not None:
                self._updater.forget(key)
        self._apply(updates)

    def _update_container_resources(self, request: bytes, forward: Forward) -> bytes:
        req = _decode(cri_pb2.UpdateContainerResourcesRequest, request)
        cid = req.container_id
        with self._lock:
            tracked = self._containers.get(cid)
            if tracked is None or not req.HasField("linux"):
                tracked = None
            else:
                new = cri_pb2.LinuxContainerResources()
                new.CopyFrom(req.linux)
                old_res, new_res = resources_of(tracked.linux), resources_of(new)
                decision = None
                if _cpu_changed(old_res, new_res):
                    info = tracked.info
                    rules = _rules_or_none(info)
                    creq = ContainerRequest(cid, info, new_res, _affinity(info, rules))
                    decision = self._decide(info, lambda: self._policy.resize(creq))
                    tracked.cpus, tracked.mems = decision.cpus, decision.mems
                    tracked.pool, tracked.exclusive = decision.pool, decision.exclusive
                    self._apply(decision.updates)
                self._write_cpusets(new, tracked.cpus, tracked.mems)
        if tracked is None:
            return forward(request)
        req.linux.CopyFrom(new)
        try:
            reply = forward(req.SerializeToString())
        except BackendError:
            with self._lock:
                if self._containers.get(cid) is tracked:
                    # A resize may have moved it: the runtime is owed its new cpuset.
                    self._want(cid)
                snapshot = self._snapshot()
            self._save(snapshot)
            self._flush()
            raise
        with self._lock:
            if self._containers.get(cid) is tracked:
                tracked.linux = new
                self._updater.set_applied(cid, new.cpuset_cpus, new.cpuset_mems)
                self._want(cid)
            snapshot = self._snapshot()
        self._save(snapshot)
        self._flush()
        if decision is not None:
            self._report(tracked.info, replace(decision, key=cid), "resized")
        return reply

    def _list_containers(self, request: bytes, forward: Forward) -> bytes:
        _decode(cri_pb2.ListContainersRequest, request)
        reply = forward(request)
        containers = cri_pb2.ListContainersResponse.FromString(reply).containers
        self._release_exited([c.id for c in containers if c.state == cri_pb2.CONTAINER_EXITED])
        return reply

    def _container_status(self, request: bytes, forward: Forward) -> bytes:
        _decode(cri_pb2.ContainerStatusRequest, request)
        reply = forward(request)
        status = cri_pb2.ContainerStatusResponse.FromString(reply).status
        if status.state == cri_pb2.CONTAINER_EXITED:
            self._release_exited([status.id])
        return reply

    def _release_exited(self, container_ids: list[str]) -> None:
        # Relists come every second: decide without the lock that nothing is to do
        # (a stale read only delays the release to the next relist).
        exited = [cid for cid in container_ids if cid in self._containers]
        if exited:
            log.info("containers exited, giving back their CPUs: %s", ", ".join(exited))
            self._release(exited)

    # -- books (decision lock held) -------------------------------------------

    def _apply(self, updates: Iterable[CpusetUpdate]) -> None:
        """Other containers' new cpusets; temporary keys (creates in flight) are
        caught up after their rekey."""
        for update in updates:
            tracked = self._containers.get(update.key)
            if tracked is None:
                continue
            tracked.cpus, tracked.mems = update.cpus, update.mems
            self._want(update.key)

    def _want(self, cid: str) -> None:
        tracked = self._containers[cid]
        full = cri_pb2.LinuxContainerResources()
        full.CopyFrom(tracked.linux)
        self._write_cpusets(full, tracked.cpus, tracked.mems)
        self._updater.want(cid, full)

    def _snapshot(self) -> tuple[int, dict[str, Any]]:
        """The state to save, built under the decision lock (so it is consistent).

        This runs on every change: with no state file it builds nothing, and the
        JSON of each pod and container is cached by the identity of its (never
        mutated, only replaced) info and resources, so a placement costs only the
        few containers it touched, not all of them.
        """
        self._version += 1
        if self._store is None:
            return self._version, {}
        cache = self._json_cache
        if len(cache) > 2 * (len(self._pods) + len(self._containers)) + 64:
            live = set(self._pods) | set(self._containers)
            for stale in [key for key in cache if key[1] not in live]:
                del cache[stale]
        payload = {
            "version": STATE_VERSION,
            "pods": {
                sid: self._cached(("pod", sid), pod, pod_to_json) for sid, pod in self._pods.items()
            },
            "containers": {
                cid: {
                    "info": self._cached(("info", cid), t.info, container_to_json),
                    "resources": self._cached(("linux", cid), t.linux, linux_to_json),
                    "cpus": str(t.cpus),
                    "mems": str(t.mems),
                    "pool": t.pool,
                    "exclusive": t.exclusive,
                }
                for cid, t in self._containers.items()
            },
        }
        return self._version, payload

    def _cached(
        self, key: tuple[str, str], value: Any, encode: Callable[[Any], dict[str, Any]]
    ) -> Any:
        hit = self._json_cache.get(key)
        if hit is None or hit[0] is not value:
            hit = (value, encode(value))
            self._json_cache[key] = hit
        return hit[1]

    # -- edges (no decision lock) -----------------------------------------------

    def _save(self, snapshot: tuple[int, dict[str, Any]]) -> None:
        if self._store is None:
            return
        version, payload = snapshot
        with self._save_lock:
            if version <= self._saved:
                return  # a newer state was written already
            try:
                self._store.save(payload)
            except StateError as err:
                # The runtime already acted; failing kubelet's call would not undo it.
                log.error("%s; placements continue, a restart will rebuild from the runtime", err)
                return
            self._saved = version

    def _flush(self) -> None:
        if not self._background:
            self._updater.flush()


def _cpu_changed(old: Resources, new: Resources) -> bool:
    return (old.cpu_shares, old.cpu_quota, old.cpu_period) != (
        new.cpu_shares,
        new.cpu_quota,
        new.cpu_period,
    )


def _rules_or_none(info: ContainerInfo) -> tuple[Any, ...]:
    try:
        return parse_pod_affinities(info.pod.annotations).rules_for(info.name)
    except AnnotationError:
        return ()
