"""The node agent: kubelet's CRI calls that matter, turned into policy decisions,
cpusets written into requests, and cpuset updates sent to other containers.

This module holds the CRI handlers and the agent's public face. What the agent
knows lives in its books (books.py: the policy's records and the CRI facts);
taking them back at start is restart.py; the state file's shape is
agent.state.schema. One lock serializes decisions; no runtime call, forwarded
or the agent's own, is ever made while holding it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

import grpc
from google.protobuf.message import DecodeError, Message

from agent.affinity import AnnotationError
from agent.node.adoption import adopt, adoptee, applied
from agent.node.books import Books, Unresolved, write_cpusets
from agent.node.crashpoints import crash_point
from agent.node.describe import (
    LIVE_STATES,
    container_info,
    container_pod,
    merge_update,
    pod_from_config,
    resources_of,
)
from agent.node.requests import container_rules, pod_rules, request_for, running_request
from agent.node.restart import list_runtime, rebuild
from agent.node.runtime_access import RuntimeAccess
from agent.node.updates import Updater
from agent.policy.config import PolicyConfig
from agent.policy.policy import (
    Decision,
    InvalidRequest,
    PlacementError,
    PoolCapacity,
    ResourceExhausted,
    RuleUnsatisfied,
)
from agent.policy.request import Resources
from agent.relay.backend import BackendError
from agent.relay.hooks import Forward, Hook, HookAbort
from agent.rules import RuleError
from agent.state import schema
from agent.state.store import StateStore
from agent.state.writer import Snapshot, StateWriter
from agent.workload import ContainerInfo
from proto import cri_pb2
from topology.cpuset import CPUSet
from topology.tree import Machine

log = logging.getLogger(__name__)

_SERVICE = "/runtime.v1.RuntimeService/"
RUN_POD_SANDBOX = _SERVICE + "RunPodSandbox"
STOP_POD_SANDBOX = _SERVICE + "StopPodSandbox"
REMOVE_POD_SANDBOX = _SERVICE + "RemovePodSandbox"
CREATE_CONTAINER = _SERVICE + "CreateContainer"
START_CONTAINER = _SERVICE + "StartContainer"
STOP_CONTAINER = _SERVICE + "StopContainer"
REMOVE_CONTAINER = _SERVICE + "RemoveContainer"
UPDATE_CONTAINER_RESOURCES = _SERVICE + "UpdateContainerResources"
LIST_CONTAINERS = _SERVICE + "ListContainers"
CONTAINER_STATUS = _SERVICE + "ContainerStatus"

# Codes with which a forwarded call can end while the runtime goes on with it: for
# a create, the container may yet appear (books.Unresolved). UNAVAILABLE is not one:
# the runtime could not be reached, or went away and took the create with it (a
# container it left behind anyway is adopted on the next relist).
UNKNOWN_OUTCOME = frozenset({grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED})
# How long a create that gave no answer keeps its CPUs when complete listings do
# not show its container (the runtime answers, but has not made it).
CREATE_GRACE_S = 60.0

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
class Wanted:
    """What the agent wants a created container's cpusets to be (for reconciling)."""

    container_id: str
    who: str  # container 'x' of pod ns/p
    cpus: CPUSet  # empty: the agent does not pin (pin_cpus off)
    mems: CPUSet


@dataclass(frozen=True, slots=True)
class Placement:
    """One live container as `status`, metrics and `simulate` show it."""

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
        self._updater = Updater(runtime.update_container_resources)
        self._books = Books(machine, config, self._updater)
        self._writer = StateWriter(store)
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
            START_CONTAINER: self._start_container,
            STOP_CONTAINER: self._stop_container,
            REMOVE_CONTAINER: self._remove_container,
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
            return self._placements_locked(), self._books.policy.capacity()

    def _placements_locked(self) -> list[Placement]:
        items = []
        for cid in self._books.sent:
            record = self._books.record(cid)
            if record is None or self._books.policy.held(cid):
                continue  # exited: its place is kept, but nothing runs there
            info = record.request.container
            items.append(
                Placement(
                    namespace=info.namespace,
                    pod=info.pod.name,
                    name=info.name,
                    container_id=cid,
                    pod_uid=info.pod.uid,
                    cpuset_cpus=str(record.cpus),
                    cpuset_mems=str(record.mems),
                    exclusive=record.is_exclusive,
                    pool=record.pool_name,
                    score=record.score,
                )
            )
        return sorted(items, key=lambda p: (p.namespace, p.pod, p.name, p.container_id))

    def pending_updates(self) -> int:
        return self._updater.pending()

    def wanted(self) -> list[Wanted]:
        """Every created container's wanted cpusets, for the periodic reconcile."""
        with self._lock:
            out = []
            for cid in self._books.sent:
                record = self._books.record(cid)
                if record is not None and not self._books.policy.held(cid):
                    out.append(Wanted(cid, record.request.container.who, record.cpus, record.mems))
            return out

    def resend(self, container_id: str) -> bool:
        """Send the container's wanted resources again, even if the runtime was told
        them already (it may not have applied them); False if it is not tracked."""
        with self._lock:
            if container_id not in self._books.sent:
                return False
            self._updater.force(container_id)
            self._books.want(container_id)
        self._flush()
        return True

    def wait_for_updates(self, timeout: float) -> bool:
        """Until nothing is owed (True) or `timeout` seconds pass (False); background mode."""
        return self._updater.wait_idle(timeout)

    def explain(self, container_id: str) -> str | None:
        """The policy's explanation of where the container is, or None if unknown."""
        with self._lock:
            record = self._books.record(container_id)
        return None if record is None else record.explanation

    def capacity(self) -> tuple[PoolCapacity, ...]:
        """Each pool's use and free capacity (Policy.capacity), consistent with placements()."""
        with self._lock:
            return self._books.policy.capacity()

    def close(self) -> None:
        self._updater.stop()
        with self._lock:
            snapshot = self._snapshot()
        self._writer.write(snapshot, full=True)  # a stopped agent leaves one whole file

    # -- start: state file + what the runtime runs ----------------------------

    def start(self) -> None:
        """Load the state file, take back what still runs (restart.py), send what is owed."""
        saved = self._load()
        listing = list_runtime(self._runtime)
        with self._lock:
            outcome = rebuild(self._books, saved, listing)
            log.info(
                "started with %d pods and %d containers (%d restored from the state file, "
                "%d placed again, %d adopted); %d updates owed",
                len(self._books.pods),
                len(self._books.sent),
                outcome.restored,
                outcome.replaced,
                outcome.adopted,
                self._updater.pending(),
            )
            snapshot = self._snapshot()
        self._writer.write(snapshot)
        self._flush()

    def _load(self) -> schema.SavedState:
        if self._store is None:
            return schema.EMPTY
        payload = self._writer.load()
        if payload is None:
            return schema.EMPTY
        try:
            return schema.decode(payload)
        except schema.StateFormatError as err:
            self._store.move_aside(f"unreadable payload: {err}")
            return schema.EMPTY

    # -- pods -----------------------------------------------------------------

    def _run_pod_sandbox(self, request: bytes, forward: Forward) -> bytes:
        config = _decode(cri_pb2.RunPodSandboxRequest, request).config
        reply = forward(request)
        sandbox_id = cri_pb2.RunPodSandboxResponse.FromString(reply).pod_sandbox_id
        pod = pod_from_config(sandbox_id, config)
        with self._lock:
            self._books.pods[sandbox_id] = pod
            snapshot = self._snapshot()
        self._writer.write(snapshot)
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
        # containers of its new sandbox (same UID) run. Creates still in flight count.
        with self._lock:
            records = self._books.policy.records()
            keys = [k for k, r in records.items() if r.request.container.pod.id == sandbox_id]
            self._books.release(keys)
            if forget_pod:
                self._books.pods.pop(sandbox_id, None)
            snapshot = self._snapshot()
        self._writer.write(snapshot)
        self._flush()

    # -- containers -----------------------------------------------------------

    def _decide(self, info: ContainerInfo, place: Callable[[], Decision]) -> Decision:
        """Run a policy call (decision lock held), mapping refusals to gRPC codes."""
        start = time.perf_counter()
        try:
            return place()
        except ResourceExhausted as err:
            raise self._refusal(grpc.StatusCode.RESOURCE_EXHAUSTED, info, err) from err
        except RuleUnsatisfied as err:
            raise self._refusal(grpc.StatusCode.FAILED_PRECONDITION, info, err) from err
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
        return HookAbort(code, f"cannot place {info.who}: {err}")

    def _report(self, info: ContainerInfo, decision: Decision, what: str) -> None:
        """A decision took effect: log it (fields for JSON logs), then tell on_decision."""
        log.info(
            "%s %s in %s on cpus %s",
            what,
            info.who,
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
                info.who,
                decision.explanation,
                extra={"container_id": decision.key, "pool": decision.pool},
            )
        if self._on_decision is not None:
            self._on_decision(info, decision)

    def _create_container(self, request: bytes, forward: Forward) -> bytes:
        req = _decode(cri_pb2.CreateContainerRequest, request)
        config = req.config
        name = config.metadata.name
        sandbox_id = req.pod_sandbox_id
        res = resources_of(config.linux.resources)
        with self._lock:
            known = self._books.pods.get(sandbox_id)
        pod = known or pod_from_config(sandbox_id, req.sandbox_config)
        info = container_info(name, container_pod(pod, res), config.labels, config.annotations)
        try:
            rules = container_rules(info)
            prules = pod_rules(info)
        except (AnnotationError, RuleError) as err:
            raise self._refusal(grpc.StatusCode.INVALID_ARGUMENT, info, err) from err
        key = f"{sandbox_id}/{name}/{config.metadata.attempt}"
        creq = request_for(key, info, res, rules, prules)
        with self._lock:
            unresolved = self._books.unresolved.get(key)
        if unresolved is not None and self._resolve_create(key, unresolved):
            # The create that gave no answer did create it: this one is a new placement.
            unresolved = None
        with self._lock:
            current = self._books.record(key)
            if current is not None and key not in self._books.unresolved:
                # kubelet retried while its first call is still in flight: placing
                # again would resize that one's allocation and both would share it.
                raise HookAbort(
                    grpc.StatusCode.ABORTED,
                    f"a CreateContainer for {info.who} (attempt {config.metadata.attempt}) "
                    "is already in flight; retry once it has finished",
                )
            retrying = current is not None
            if retrying:
                # Retrying a create that gave no answer: the runtime may still create
                # the first one, with these CPUs, so the retry gets the same ones.
                decision = self._books.policy.current(key)
                assert decision is not None
            else:
                decision = self._decide(info, lambda: self._books.policy.place(creq))
                self._books.pods.setdefault(sandbox_id, pod)
                self._books.apply(decision.updates)
                if decision.replaced:  # a re-create took the exited container's place
                    self._books.release([decision.replaced])
        crash_point("create-after-decision")
        linux = req.config.linux.resources  # created on first write if kubelet sent none
        write_cpusets(linux, decision.cpus, decision.mems)
        try:
            reply = forward(req.SerializeToString())
        except BackendError as err:
            if retrying:
                pass  # the first create may still make it: the reservation stays as it was
            elif err.code in UNKNOWN_OUTCOME:
                self._give_up_on_create(key, info, linux, err)
            else:
                self._release([key])  # the runtime answered: nothing was created
            raise
        crash_point("create-after-runtime")
        cid = cri_pb2.CreateContainerResponse.FromString(reply).container_id
        with self._lock:
            if self._books.record(key) is None:
                # Its sandbox was stopped while the create was in flight.
                log.info("%s (%s) created after its pod was stopped", cid, info.who)
                return reply
            self._books.adopt_created(key, cid, linux)
            record = self._books.record(cid)
            assert record is not None
            placed = record.request.container
            snapshot = self._snapshot()
        self._writer.write(snapshot)
        crash_point("create-after-save")
        self._flush()
        self._report(placed, replace(decision, key=cid), "placed")
        return reply

    def _give_up_on_create(
        self,
        key: str,
        info: ContainerInfo,
        linux: cri_pb2.LinuxContainerResources,
        err: BackendError,
    ) -> None:
        """No answer came: keep the placement reserved (see books.Unresolved), and
        look once whether the runtime has the container already."""
        copy = cri_pb2.LinuxContainerResources()
        copy.CopyFrom(linux)
        unresolved = Unresolved(time.monotonic(), copy)
        with self._lock:
            if self._books.record(key) is None:
                return  # its sandbox went meanwhile
            self._books.unresolved[key] = unresolved
        log.warning(
            "CreateContainer for %s gave no answer (%s); its CPUs %s stay reserved until the "
            "runtime is seen to have created it or not",
            info.who,
            err.code.name,
            linux.cpuset_cpus or "-",
        )
        with contextlib.suppress(BackendError):
            self._resolve_create(key, unresolved)

    def _resolve_create(self, key: str, unresolved: Unresolved) -> bool:
        """Ask the runtime whether the create under `key` made a container; if so,
        track it (True). Raises BackendError if the runtime cannot be asked."""
        sandbox_id, name, attempt = key.rsplit("/", 2)
        for ctr in self._runtime.list_containers():
            if (
                ctr.pod_sandbox_id == sandbox_id
                and ctr.metadata.name == name
                and str(ctr.metadata.attempt) == attempt
            ):
                self._adopt_unresolved(key, ctr.id, unresolved)
                return True
        return False

    def _adopt_unresolved(self, key: str, cid: str, unresolved: Unresolved) -> None:
        with self._lock:
            if self._books.unresolved.get(key) is not unresolved or cid in self._books.sent:
                return
            self._books.adopt_created(key, cid, unresolved.linux)
            snapshot = self._snapshot()
        log.info("%s: the create that gave no answer made container %s; tracking it", key, cid)
        self._writer.write(snapshot)
        self._flush()

    def _start_container(self, request: bytes, forward: Forward) -> bytes:
        """containerd 1.6 applies an update that arrives while a container starts to
        its spec only: the task starts with the old cpuset, and ContainerStatus
        reports the new one. So an update in flight at any moment of the start is
        sent again once the start is over (when the task exists)."""
        container_id = _decode(cri_pb2.StartContainerRequest, request).container_id
        if container_id not in self._books.sent:
            return forward(request)
        self._updater.starting(container_id)
        try:
            reply = forward(request)
        finally:
            overlapped = self._updater.started(container_id)
        if overlapped:
            log.info("%s: its cpuset changed while it started; sending it again", container_id)
            self.resend(container_id)
        return reply

    def _stop_container(self, request: bytes, forward: Forward) -> bytes:
        # StopContainerRequest and RemoveContainerRequest both carry container_id=1.
        container_id = _decode(cri_pb2.RemoveContainerRequest, request).container_id
        reply = forward(request)
        self._exited([container_id])
        return reply

    def _remove_container(self, request: bytes, forward: Forward) -> bytes:
        container_id = _decode(cri_pb2.RemoveContainerRequest, request).container_id
        reply = forward(request)
        crash_point("remove-after-runtime")
        with self._lock:
            self._books.removed([container_id])
            snapshot = self._snapshot()
        self._writer.write(snapshot)
        self._flush()
        return reply

    def _exited(self, keys: Iterable[str]) -> None:
        """Stopped, removed or exited: the place is kept for a re-create until the
        sandbox stops (the policy's `exited`)."""
        with self._lock:
            self._books.exited(keys)
            snapshot = self._snapshot()
        self._writer.write(snapshot)
        self._flush()

    def _release(self, keys: Iterable[str]) -> None:
        with self._lock:
            self._books.release(keys)
            snapshot = self._snapshot()
        self._writer.write(snapshot)
        self._flush()

    def _update_container_resources(self, request: bytes, forward: Forward) -> bytes:
        req = _decode(cri_pb2.UpdateContainerResourcesRequest, request)
        cid = req.container_id
        if cid not in self._books.sent or not req.HasField("linux"):
            return forward(request)  # not the agent's (a stale read is harmless: checked below)
        # One writer per container, in order: kubelet's update waits for an update of
        # the agent's in flight, none starts meanwhile, and what is owed afterwards is
        # built from the resources this one leaves.
        try:
            with self._updater.writing(cid):
                return self._update_in_order(req, cid, request, forward)
        finally:
            self._flush()  # what is owed now, once the writer's turn is over

    def _update_in_order(
        self,
        req: cri_pb2.UpdateContainerResourcesRequest,
        cid: str,
        request: bytes,
        forward: Forward,
    ) -> bytes:
        decision = None
        with self._lock:
            record = self._books.record(cid) if cid in self._books.sent else None
            if record is None:
                new = None
            else:
                # Fields left unset mean "unchanged" (a partial update, as crictl
                # sends), not "zero": the runtime keeps them, and so does the agent.
                new = merge_update(self._books.sent[cid], req.linux)
                new_res = resources_of(new)
                if _cpu_changed(record.request.resources, new_res):
                    info = record.request.container
                    creq = running_request(cid, info, new_res)
                    decision = self._decide(info, lambda: self._books.policy.resize(creq))
                    self._books.apply(decision.updates)
                    record = self._books.record(cid)
                    assert record is not None
                write_cpusets(new, record.cpus, record.mems)
        if record is None or new is None:
            return forward(request)
        req.linux.CopyFrom(new)
        try:
            reply = forward(req.SerializeToString())
        except BackendError:
            with self._lock:
                if cid in self._books.sent:
                    # A resize may have moved it: the runtime is owed its new cpuset.
                    self._books.want(cid)
                snapshot = self._snapshot()
            self._writer.write(snapshot)
            raise
        with self._lock:
            if cid in self._books.sent:
                self._books.created(cid, new)
                self._updater.set_applied(cid, new.cpuset_cpus, new.cpuset_mems)
                self._books.want(cid)
            snapshot = self._snapshot()
        self._writer.write(snapshot)
        if decision is not None:
            self._report(record.request.container, decision, "resized")
        return reply

    def _list_containers(self, request: bytes, forward: Forward) -> bytes:
        req = _decode(cri_pb2.ListContainersRequest, request)
        reply = forward(request)
        containers = cri_pb2.ListContainersResponse.FromString(reply).containers
        self._release_exited([c.id for c in containers if c.state == cri_pb2.CONTAINER_EXITED])
        # kubelet relists every second: decide without the lock that nothing is to do.
        sent, unresolved = self._books.sent, self._books.unresolved
        strangers = [c for c in containers if c.state in LIVE_STATES and c.id not in sent]
        if strangers or unresolved:
            self._take_in(strangers, complete=not req.HasField("filter"))
        return reply

    def _take_in(self, strangers: list[cri_pb2.Container], *, complete: bool) -> None:
        """Live containers the agent does not track: one a create that gave no answer
        made is tracked under that placement; one created behind the agent's back is
        adopted where it runs, before its CPUs can go to anyone else. A create that
        gave no answer and whose container a complete listing still lacks after
        CREATE_GRACE_S is given up: its CPUs are free again."""
        seen: set[str] = set()
        for ctr in strangers:
            key = f"{ctr.pod_sandbox_id}/{ctr.metadata.name}/{ctr.metadata.attempt}"
            seen.add(key)
            with self._lock:
                unresolved = self._books.unresolved.get(key)
                in_flight = unresolved is None and self._books.record(key) is not None
            if unresolved is not None:
                self._adopt_unresolved(key, ctr.id, unresolved)
            elif not in_flight:  # a create in flight is tracked when it returns
                self._adopt_stranger(ctr)
        if not complete:
            return
        now = time.monotonic()
        with self._lock:
            stale = [
                key
                for key, u in self._books.unresolved.items()
                if key not in seen and now - u.since > CREATE_GRACE_S
            ]
        if stale:
            log.warning(
                "creates that gave no answer made no container in %.0fs; freeing their CPUs: %s",
                CREATE_GRACE_S,
                ", ".join(stale),
            )
            self._release(stale)

    def _adopt_stranger(self, ctr: cri_pb2.Container) -> None:
        try:
            status = self._runtime.container_status(ctr.id)
        except BackendError as err:
            log.debug("cannot adopt %s yet: %s", ctr.id, err)
            return
        with self._lock:
            if ctr.id in self._books.sent:
                return
            request, _ = adoptee(self._books, ctr, status)
            linux = status.resources.linux
            if adopt(self._books, request, linux) is None:
                return
            self._books.created(ctr.id, linux)
            applied(self._books, ctr.id, status)
            self._books.want(ctr.id)
            snapshot = self._snapshot()
        self._writer.write(snapshot)
        self._flush()

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
        policy = self._books.policy
        exited = [cid for cid in container_ids if cid in self._books.sent and not policy.held(cid)]
        if exited:
            log.info("containers exited, their places kept for a re-create: %s", ", ".join(exited))
            self._exited(exited)

    # -- edges ------------------------------------------------------------------

    def _snapshot(self) -> Snapshot:
        """The state to save, taken under the decision lock (so it is consistent);
        with no state file it builds nothing."""
        if self._store is None:
            return self._writer.snapshot({})
        return self._writer.snapshot(self._books.payload())

    def _flush(self) -> None:
        if not self._background:
            self._updater.flush()


def _cpu_changed(old: Resources, new: Resources) -> bool:
    return (old.cpu_shares, old.cpu_quota, old.cpu_period) != (
        new.cpu_shares,
        new.cpu_quota,
        new.cpu_period,
    )
