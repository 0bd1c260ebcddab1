"""Cpuset updates the agent owes running containers, and sending them.

The agent says what each container's resources should be (`want`); the runtime's
last accepted cpuset is remembered (`applied`), so only real changes are owed and
a newer wish replaces an older one (per-container coalescing). `flush` sends
synchronously; `start_worker` sends in the background.

Each container's updates are independent of every other's: the background sender
gives each due container its own thread for its call (at most MAX_SENDERS at
once), each call has its own deadline (the runtime access's update timeout), and
each container has its own capped exponential back-off after a failure. A hung
shim or a frozen cgroup therefore delays only its own container's updates. The
back-off belongs to the container, not to the wish: a new wish or the reconcile's
re-send waits for it, it is not reset.

An update that failed or timed out may still have been applied (a stopped shim
applies it when resumed): the container's cpuset is then unknown, not "as before",
so its next wish is always sent, even one equal to what the runtime last accepted,
until a send succeeds or the reconcile reads the cpuset back (`confirm`). And
since calls stuck at a stopped shim are applied when it resumes, in any order,
the first send that goes through after such a failure is checked against the
kernel's view VERIFY_AFTER_S later (background mode, `verify`): a difference
makes the cpuset unknown again and the wish is sent again.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import grpc

from agent.node.crashpoints import crash_point
from agent.relay.backend import BackendError
from proto import cri_pb2
from topology.cpuset import CPUSet, CPUSetError

log = logging.getLogger(__name__)

Send = Callable[[str, cri_pb2.LinuxContainerResources], None]
# Reads back what the kernel lets a container use: (cpus, mems) in list form, or
# None when it cannot be read (no pid, another pid namespace).
Verify = Callable[[str], tuple[str, str] | None]

FIRST_BACKOFF_S = 0.05
MAX_BACKOFF_S = 5.0
# After an update whose outcome was unknown finally goes through, the kernel's view
# is read back this much later: calls stuck at a stopped shim are applied when it
# resumes, in any order, possibly after the one that went through.
VERIFY_AFTER_S = 0.5
# Calls in flight at once in the background; more due containers wait for a free
# sender. A hung call holds one for at most its deadline.
MAX_SENDERS = 64
# The container is gone or no longer running: its cpuset does not matter any more.
GIVE_UP_CODES = frozenset({grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION})


@dataclass(slots=True)
class _Owed:
    resources: cri_pb2.LinuxContainerResources


@dataclass(slots=True)
class _Backoff:
    """A container's failed sends in a row and when the next may go."""

    failures: int = 0
    due: float = 0.0


def _cpuset(res: cri_pb2.LinuxContainerResources) -> tuple[str, str]:
    return res.cpuset_cpus, res.cpuset_mems


def _same(seen: tuple[str, str], wanted: tuple[str, str]) -> bool:
    """Whether the kernel's (cpus, mems) are the wanted ones; an empty wanted set
    (not pinned) matches anything."""
    for have, want in zip(seen, wanted, strict=True):
        if not want:
            continue
        try:
            if CPUSet.parse(have) != CPUSet.parse(want):
                return False
        except CPUSetError:
            return False
    return True


def backoff_after(failures: int) -> float:
    """Seconds to wait after `failures` failed sends in a row (capped exponential)."""
    return float(min(FIRST_BACKOFF_S * 2 ** (failures - 1), MAX_BACKOFF_S))


class Updater:
    """What is owed to whom. Its lock guards only dicts; no runtime call is made under it."""

    def __init__(
        self,
        send: Send,
        clock: Callable[[], float] = time.monotonic,
        verify: Verify | None = None,
    ) -> None:
        self._send = send
        self._clock = clock
        self._verify = verify
        # Containers to read back (when, and the resources that went through).
        self._checks: dict[str, tuple[float, cri_pb2.LinuxContainerResources]] = {}
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._owed: dict[str, _Owed] = {}
        self._applied: dict[str, tuple[str, str]] = {}
        self._unknown: set[str] = set()  # an update failed or timed out: not known
        self._backoff: dict[str, _Backoff] = {}
        self._sending: set[str] = set()  # the agent's own updates at the runtime now
        self._writing: set[str] = set()  # kubelet's updates being forwarded now
        # Containers whose StartContainer is in flight -> whether an update was in
        # flight at any moment of it (containerd 1.6 applies such an update to the
        # spec only: the task starts with the old cpuset).
        self._starting: dict[str, bool] = {}
        self._stop = False
        self._thread: threading.Thread | None = None
        self._senders: ThreadPoolExecutor | None = None

    # -- bookkeeping (called under the agent's decision lock; cheap) ----------

    def set_applied(self, container_id: str, cpus: str, mems: str) -> None:
        """The runtime has these cpusets for the container (it was created or listed so)."""
        with self._lock:
            self._applied[container_id] = (cpus, mems)
            self._unknown.discard(container_id)

    def unknown(self, container_id: str) -> None:
        """A call that changes the container's resources failed: it may still have been
        applied, so what the runtime has is not known until read back or sent again."""
        with self._lock:
            self._applied.pop(container_id, None)
            self._unknown.add(container_id)

    def confirm(self, container_id: str, cpus: str, mems: str) -> None:
        """The runtime reports, and the kernel shows, these cpusets (read back): an
        unknown cpuset is known again, and a wish for exactly it is no longer owed."""
        with self._lock:
            if container_id not in self._unknown or container_id in self._sending:
                return
            self._unknown.discard(container_id)
            self._applied[container_id] = (cpus, mems)
            owed = self._owed.get(container_id)
            if owed is not None and _cpuset(owed.resources) == (cpus, mems):
                del self._owed[container_id]
                self._changed.notify_all()

    def is_unknown(self, container_id: str) -> bool:
        with self._lock:
            return container_id in self._unknown

    def want(self, container_id: str, resources: cri_pb2.LinuxContainerResources) -> None:
        """The container's full resources should be `resources` (a private copy is kept)."""
        with self._lock:
            # While a send is in flight, or after one failed, the runtime's cpuset is
            # not known: keep the wish.
            in_flight = container_id in self._sending
            if not in_flight and self._applied.get(container_id) == _cpuset(resources):
                self._owed.pop(container_id, None)
                return
            copy = cri_pb2.LinuxContainerResources()
            copy.CopyFrom(resources)
            self._owed[container_id] = _Owed(copy)
            self._changed.notify_all()

    @contextlib.contextmanager
    def writing(self, container_id: str) -> Iterator[None]:
        """kubelet's own update of the container is forwarded inside this: one writer
        per container, in order. It waits for an update of the agent's in flight to
        finish, and none starts meanwhile; what is owed afterwards is built (by
        `want`, inside) from the resources kubelet's update leaves."""
        with self._lock:
            while container_id in self._sending or container_id in self._writing:
                self._changed.wait()
            self._writing.add(container_id)
            self._touch(container_id)
        try:
            yield
        finally:
            with self._lock:
                self._writing.discard(container_id)
                self._changed.notify_all()

    def force(self, container_id: str) -> None:
        """Forget what the runtime was last told, so the next `want` is sent even if
        it is the same: for when the runtime may not have applied what it accepted."""
        with self._lock:
            self._applied.pop(container_id, None)

    def starting(self, container_id: str) -> None:
        """StartContainer for the container is about to be forwarded."""
        with self._lock:
            self._starting[container_id] = container_id in self._sending

    def started(self, container_id: str) -> bool:
        """StartContainer returned; True if an update was in flight while it ran."""
        with self._lock:
            return self._starting.pop(container_id, False)

    def _touch(self, container_id: str) -> None:
        """Lock held: its resources are being written now (for `started`)."""
        if container_id in self._starting:
            self._starting[container_id] = True

    def _free(self, container_id: str) -> bool:
        """Lock held: nobody writes the container's resources at the runtime now."""
        return container_id not in self._sending and container_id not in self._writing

    def _due(self, container_id: str) -> float:
        """Lock held: when the container's next send may go (its back-off)."""
        backoff = self._backoff.get(container_id)
        return 0.0 if backoff is None else backoff.due

    def _mark_sending(self, container_ids: Iterable[str]) -> None:
        """Lock held: these are being sent now."""
        for cid in container_ids:
            self._sending.add(cid)
            self._touch(cid)

    def forget(self, container_id: str) -> None:
        with self._lock:
            self._owed.pop(container_id, None)
            self._applied.pop(container_id, None)
            self._unknown.discard(container_id)
            self._backoff.pop(container_id, None)
            self._checks.pop(container_id, None)
            self._changed.notify_all()

    def pending(self) -> int:
        with self._lock:
            return len(self._owed)

    def retry_at(self, container_id: str) -> float | None:
        """When the container's next send may go after failures (its clock), or None."""
        with self._lock:
            backoff = self._backoff.get(container_id)
            return None if backoff is None else backoff.due

    def in_flight(self) -> frozenset[str]:
        """The containers whose update is at the runtime now."""
        with self._lock:
            return frozenset(self._sending)

    # -- sending ---------------------------------------------------------------

    def _attempt(self, container_id: str, owed: _Owed) -> None:
        """One send, outside the lock; the outcome is recorded under it."""
        try:
            self._send(container_id, owed.resources)
            crash_point("update-after-runtime")
        except BackendError as err:
            with self._lock:
                self._failed(container_id, owed, err)
                self._changed.notify_all()
            return
        with self._lock:
            self._sending.discard(container_id)
            self._touch(container_id)
            # Forgotten while in flight: the container is gone, remember nothing.
            if container_id in self._owed or container_id in self._applied:
                self._applied[container_id] = _cpuset(owed.resources)
                checking = self._verify is not None and self._thread is not None
                if container_id in self._unknown and checking:
                    due = self._clock() + VERIFY_AFTER_S
                    self._checks[container_id] = (due, owed.resources)
                self._unknown.discard(container_id)
            backoff = self._backoff.pop(container_id, None)
            if backoff is not None and backoff.failures:
                log.info(
                    "cpuset update of %s to cpus %r mems %r went through after %d failed attempts",
                    container_id,
                    owed.resources.cpuset_cpus,
                    owed.resources.cpuset_mems,
                    backoff.failures,
                )
            if self._owed.get(container_id) is owed:
                del self._owed[container_id]
            self._changed.notify_all()

    def _failed(self, container_id: str, owed: _Owed, err: BackendError) -> None:
        """Lock held: a send failed. Its outcome is unknown (the runtime may apply it
        yet); the container backs off, whatever it is owed now."""
        self._sending.discard(container_id)
        self._touch(container_id)
        gone = container_id not in self._owed and container_id not in self._applied
        if err.code in GIVE_UP_CODES or (gone and container_id not in self._unknown):
            if self._owed.get(container_id) is owed:
                log.info("cpuset update of %s dropped: %s", container_id, err)
                del self._owed[container_id]
            self._backoff.pop(container_id, None)
            return
        self._applied.pop(container_id, None)
        self._unknown.add(container_id)
        backoff = self._backoff.setdefault(container_id, _Backoff())
        backoff.failures += 1
        wait = backoff_after(backoff.failures)
        backoff.due = self._clock() + wait
        # One line per step of the back-off; at its cap, one more and then quiet
        # (debug) until the update goes through.
        if backoff.failures == 1 or backoff_after(backoff.failures - 1) < MAX_BACKOFF_S:
            capped = wait >= MAX_BACKOFF_S
            log.warning(
                "cpuset update of %s to cpus %r mems %r failed (attempt %d; its cpuset is "
                "unknown until an update goes through; retrying in %.2fs%s): %s",
                container_id,
                owed.resources.cpuset_cpus,
                owed.resources.cpuset_mems,
                backoff.failures,
                wait,
                ", and at this interval from now on without logging each" if capped else "",
                err,
            )
        else:
            log.debug("cpuset update of %s failed again: %s", container_id, err)

    def _check(self, container_id: str, resources: cri_pb2.LinuxContainerResources) -> None:
        """Read back what the kernel lets the container use after an update whose
        outcome was unknown went through; a difference is sent again."""
        assert self._verify is not None
        try:
            seen = self._verify(container_id)
        except Exception as err:  # a read-back must never stop the sender
            log.debug("cannot read back %s: %s", container_id, err)
            seen = None
        with self._lock:
            self._sending.discard(container_id)
            self._changed.notify_all()
            if seen is None or self._applied.get(container_id) != _cpuset(resources):
                return  # cannot tell, or changed (forgotten, sent again) meanwhile
            if _same(seen, _cpuset(resources)):
                return
            log.warning(
                "%s: the kernel lets it use cpus %s mems %s although the runtime accepted "
                "cpus %r mems %r (an update stuck earlier was applied late); sending it again",
                container_id,
                seen[0],
                seen[1],
                resources.cpuset_cpus,
                resources.cpuset_mems,
            )
            self._applied.pop(container_id, None)
            self._unknown.add(container_id)
            if container_id not in self._owed:
                self._owed[container_id] = _Owed(resources)

    def flush(self) -> int:
        """Send everything owed once, now (synchronous mode); returns how many are still owed."""
        with self._lock:
            batch = [(cid, owed) for cid, owed in self._owed.items() if self._free(cid)]
            self._mark_sending(cid for cid, _ in batch)
        for cid, owed in batch:
            self._attempt(cid, owed)
        return self.pending()

    def start_worker(self) -> None:
        if self._thread is not None:
            return
        self._senders = ThreadPoolExecutor(MAX_SENDERS, thread_name_prefix="cpuset-update")
        self._thread = threading.Thread(target=self._run, name="cpuset-updates", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        """Hand every due container to a sender of its own; never wait for a send."""
        senders = self._senders
        assert senders is not None
        while True:
            with self._lock:
                while True:
                    if self._stop:
                        return
                    now = self._clock()
                    due = []
                    waits = []
                    for cid, owed in self._owed.items():
                        if not self._free(cid):
                            continue
                        at = self._due(cid)
                        if at <= now:
                            due.append((cid, owed))
                        else:
                            waits.append(at - now)
                    checks = []
                    for cid, (at, _) in self._checks.items():
                        if cid in self._owed or not self._free(cid):
                            continue  # a newer wish is on its way: that one is checked
                        if at <= now:
                            checks.append(cid)
                        else:
                            waits.append(at - now)
                    if due or checks:
                        break
                    self._changed.wait(min(waits) if waits else None)
                self._mark_sending(cid for cid, _ in due)
                self._mark_sending(checks)
                sent = [(cid, self._checks.pop(cid)[1]) for cid in checks]
            for cid, owed in due:
                senders.submit(self._attempt, cid, owed)
            for cid, resources in sent:
                senders.submit(self._check, cid, resources)

    def wait_idle(self, timeout: float) -> bool:
        """Block until nothing is owed or to be read back (True) or `timeout` seconds
        pass (False)."""
        deadline = self._clock() + timeout
        with self._lock:
            while self._owed or self._checks or self._sending:
                left = deadline - self._clock()
                if left <= 0:
                    return False
                self._changed.wait(left)
            return True

    def stop(self) -> None:
        with self._lock:
            self._stop = True
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._senders is not None:
            # Sends in flight end by their own deadline; nobody waits for them here.
            self._senders.shutdown(wait=False, cancel_futures=True)
            self._senders = None
