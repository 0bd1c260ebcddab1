"""The node agent: kubelet's CRI calls that matter, turned into policy decisions,
cpusets written into requests, and cpuset updates sent to other containers.

This module is the agent's public face: its handler table and what `status`,
metrics, the reconcile and `simulate` ask of it. The handlers live by job in
sandboxes.py, create.py, containers.py and relist.py; what the agent knows lives in
its books (books.py), changed only through keeper.py (under the decision lock,
then persisted, then flushed); taking them back at start is restart.py. No
runtime call, forwarded or the agent's own, is ever made while holding the lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from agent.node.backoff import Backoff
from agent.node.books import Books
from agent.node.containers import Containers
from agent.node.create import CREATE_GRACE_S, UNKNOWN_OUTCOME, Creates
from agent.node.decisions import Decider, OnDecision, PlacementObserver
from agent.node.keeper import BookKeeper
from agent.node.kernel import read_back
from agent.node.methods import (
    CONTAINER_STATUS,
    CREATE_CONTAINER,
    LIST_CONTAINERS,
    REMOVE_CONTAINER,
    REMOVE_POD_SANDBOX,
    RUN_POD_SANDBOX,
    START_CONTAINER,
    STOP_CONTAINER,
    STOP_POD_SANDBOX,
    UPDATE_CONTAINER_RESOURCES,
)
from agent.node.relist import Relists
from agent.node.restart import Outcome, list_runtime, rebuild
from agent.node.runtime_access import RuntimeAccess
from agent.node.sandboxes import Pods
from agent.node.updates import Updater
from agent.node.views import Placement, Wanted, placements_of, wanted_of
from agent.policy.config import PolicyConfig
from agent.policy.policy import PoolCapacity
from agent.relay.backend import BackendError
from agent.relay.hooks import Forward, Hook
from agent.state import schema
from agent.state.store import StateStore
from agent.state.writer import StateWriter
from topology.tree import Machine

__all__ = [
    "CONTAINER_STATUS",
    "CREATE_CONTAINER",
    "CREATE_GRACE_S",
    "LIST_CONTAINERS",
    "REMOVE_CONTAINER",
    "REMOVE_POD_SANDBOX",
    "RUN_POD_SANDBOX",
    "START_CONTAINER",
    "STOP_CONTAINER",
    "STOP_POD_SANDBOX",
    "UNKNOWN_OUTCOME",
    "UPDATE_CONTAINER_RESOURCES",
    "Handler",
    "NodeAgent",
    "OnDecision",
    "Placement",
    "PlacementObserver",
    "Wanted",
]

log = logging.getLogger(__name__)

# Context-free so `simulate` (and the NRI front door) can call it without gRPC;
# raises HookAbort, and a BackendError from `forward` passes through unchanged.
Handler = Callable[[bytes, Forward], bytes]


class NodeAgent:
    """Placement on the CRI calls that matter; see handlers() for which.

    Choices worth knowing:
    - A pod whose cgroup parent names no QoS class (not kubelet's layout) gets, per
      container, the class its own resources suggest (describe.qos_from_resources):
      never exclusive CPUs unless its CPU limit equals a whole-CPU request.
    - Stopping or removing a sandbox releases the containers of that sandbox id, not
      of the pod UID: an old sandbox of a pod may go while its new one runs.
    - While the state cannot be written, calls that need a new record are refused
      with UNAVAILABLE (keeper.py); releases go on.
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
        adoption_backoff: Backoff | None = None,
    ) -> None:
        self.machine = machine
        self.config = config
        self._runtime = runtime
        self._store = store
        self._updater = Updater(
            runtime.update_container_resources, verify=lambda cid: _read_back(runtime, cid)
        )
        self._keeper = BookKeeper(
            Books(machine, config, self._updater),
            StateWriter(store),
            self._updater,
            background=background_updates,
        )
        decider = Decider(observer, on_decision)
        self._pods = Pods(self._keeper)
        self._creates = Creates(self._keeper, decider, runtime)
        self._containers = Containers(self._keeper, decider, runtime)
        # Containers a relist could not adopt: tried again after a growing wait.
        retries = Backoff() if adoption_backoff is None else adoption_backoff
        self._relists = Relists(self._keeper, self._creates, runtime, retries)
        self.started = Outcome(0, 0, 0)  # how the last start took containers back
        if background_updates:
            self._updater.start_worker()

    # Kept for tests and tools that look at the books and the writer directly.
    @property
    def _books(self) -> Books:
        return self._keeper.books

    @property
    def _writer(self) -> StateWriter:
        return self._keeper.writer

    # -- public API ------------------------------------------------------------

    def handlers(self) -> dict[str, Handler]:
        """Full CRI method name -> handler. Other methods are relayed untouched."""
        return {
            RUN_POD_SANDBOX: self._pods.run_pod_sandbox,
            STOP_POD_SANDBOX: self._pods.stop_pod_sandbox,
            REMOVE_POD_SANDBOX: self._pods.remove_pod_sandbox,
            CREATE_CONTAINER: self._creates.create_container,
            START_CONTAINER: self._containers.start_container,
            STOP_CONTAINER: self._containers.stop_container,
            REMOVE_CONTAINER: self._containers.remove_container,
            UPDATE_CONTAINER_RESOURCES: self._containers.update_container_resources,
            LIST_CONTAINERS: self._relists.list_containers,
            CONTAINER_STATUS: self._relists.container_status,
        }

    def relay_hooks(self) -> dict[str, Hook]:
        def adapt(handler: Handler) -> Hook:
            return lambda request, forward, _context: handler(request, forward)

        return {method: adapt(handler) for method, handler in self.handlers().items()}

    def placements(self) -> list[Placement]:
        return self._keeper.read(placements_of)

    def placements_and_capacity(self) -> tuple[list[Placement], tuple[PoolCapacity, ...]]:
        """Both under one lock acquisition, so a decision cannot land between them."""
        return self._keeper.read(lambda b: (placements_of(b), b.policy.capacity()))

    def pending_updates(self) -> int:
        return self._updater.pending()

    def state_problem(self) -> str:
        """Why the state cannot be written now ("" when it can): calls that need a
        new record are refused meanwhile."""
        return self._keeper.writer.failing

    def wanted(self) -> list[Wanted]:
        """Every created container's wanted cpusets, for the periodic reconcile."""

        return self._keeper.read(wanted_of)

    def resend(self, container_id: str) -> bool:
        """Send the container's wanted resources again, even if the runtime was told
        them already (it may not have applied them); False if it is not tracked."""
        return self._containers.resend(container_id)

    def confirm(self, container_id: str, cpus: str, mems: str) -> None:
        """The runtime and the kernel were seen with these cpusets (the reconcile):
        an update whose outcome was unknown is known again."""
        self._updater.confirm(container_id, cpus, mems)

    def updates_in_flight(self) -> frozenset[str]:
        """The containers whose cpuset update is at the runtime now."""
        return self._updater.in_flight()

    def wait_for_updates(self, timeout: float) -> bool:
        """Until nothing is owed (True) or `timeout` seconds pass (False); background mode."""
        return self._updater.wait_idle(timeout)

    def explain(self, container_id: str) -> str | None:
        """The policy's explanation of where the container is, or None if unknown."""
        record = self._keeper.read(lambda b: b.record(container_id))
        return None if record is None else record.explanation

    def capacity(self) -> tuple[PoolCapacity, ...]:
        """Each pool's use and free capacity (Policy.capacity), consistent with placements()."""
        return self._keeper.read(lambda b: b.policy.capacity())

    def close(self) -> None:
        self._updater.stop()
        with self._keeper.lock:
            snapshot = self._keeper.snapshot()
        self._keeper.writer.write(snapshot, full=True)  # a stopped agent leaves one whole file

    # -- start: state file + what the runtime runs ----------------------------

    def start(self) -> None:
        """Load the state file, take back what still runs (restart.py), send what is owed."""
        saved = self._load()
        listing = list_runtime(self._runtime)

        def take_back(books: Books) -> None:
            outcome = self.started = rebuild(books, saved, listing)
            log.info(
                "started with %d pods and %d containers (%d restored from the state file, "
                "%d placed again, %d adopted where they run, %d adopted and moved to CPUs of "
                "their own); %d updates owed",
                len(books.pods),
                outcome.total,
                outcome.restored,
                outcome.replaced,
                outcome.adopted,
                outcome.moved,
                self._updater.pending(),
            )

        self._keeper.change(take_back)

    def _load(self) -> schema.SavedState:
        if self._store is None:
            return schema.EMPTY
        payload = self._keeper.writer.load()
        if payload is None:
            return schema.EMPTY
        try:
            return schema.decode(payload)
        except schema.StateFormatError as err:
            self._store.move_aside(f"unreadable payload: {err}")
            return schema.EMPTY


def _read_back(runtime: RuntimeAccess, container_id: str) -> tuple[str, str] | None:
    """The kernel's view of the container (updates.Verify); None when it cannot be read."""
    try:
        return read_back(runtime.container_pid, container_id)
    except BackendError:
        return None
