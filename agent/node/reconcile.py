"""The periodic reconcile: what the kernel enforces is made to agree with the agent's record.

A runtime can accept a cpuset and never apply it (containerd 1.6 drops an update
that arrives while a container starts), or someone can change it behind the
agent's back. So every period, as kubelet's CPU manager does every 10 s, each
running container the agent placed is checked:

- the runtime's reported cpuset and the kernel's view of its process
  (/proc/<pid>/status) are compared with the record; a CPU or memory node the
  kernel allows outside the record, or a reported cpuset that differs, is a
  **repair**: the wanted resources are sent again, counted and logged by name;
- where the kernel's view cannot be read (no pid reported, another pid
  namespace) or is narrower than the record (the container may have narrowed its
  own affinity, or a widening was dropped), the wanted resources are **re-sent**
  anyway: for a cgroup already right that changes nothing in the kernel.

So anything a runtime dropped is repaired within one period.

The kernel's view is that of every task in the container's cgroup (its cpuset
`tasks` on cgroup v1, `cgroup.threads` on v2), not only its first process. A
process of the container found outside its cgroup (a child moved out, or the
first process itself) is something no runtime call can repair: it is reported
once (a warning, `numa_agent_reconcile_unrepairable_total`, and `status`'s
`stray_processes`), and neither repaired nor counted as the container's view.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Protocol

import grpc

from agent.node.agent import NodeAgent, Wanted
from agent.node.kernel import (
    CGROUP_ROOT,
    PROC,
    Allowed,
    cgroup_of,
    cgroup_tasks,
    descendants,
    read_allowed,
)
from agent.node.runtime_access import RuntimeAccess
from agent.relay.backend import BackendError
from proto import cri_pb2
from topology.cpuset import CPUSet, CPUSetError

log = logging.getLogger(__name__)

DEFAULT_PERIOD_S = 10.0


class Action(Enum):
    SKIP = "skip"  # not running, or gone
    OK = "ok"  # the kernel and the runtime agree with the record
    REPAIR = "repair"  # they do not: send again, count, log
    RESEND = "resend"  # cannot tell: send again (a no-op for a cgroup already right)


class ReconcileObserver(Protocol):
    """Told of every repair and re-send, and once of each process it cannot repair (metrics)."""

    def repaired(self) -> None: ...

    def resent(self) -> None: ...

    def unrepairable(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Stray:
    """A process of a container outside the container's cgroup."""

    container_id: str
    pid: int
    cgroup: str

    def __str__(self) -> str:
        return f"{self.container_id}: pid {self.pid} in {self.cgroup}"


@dataclass(frozen=True, slots=True)
class Report:
    """One pass: how many running containers were checked, which were repaired (ids),
    and how many were re-sent without a detected difference."""

    checked: int
    repaired: tuple[str, ...]
    resent: int


class Reconciler:
    def __init__(
        self,
        agent: NodeAgent,
        runtime: RuntimeAccess,
        period_s: float = DEFAULT_PERIOD_S,
        *,
        proc: Path = PROC,
        observer: ReconcileObserver | None = None,
        cgroup_root: Path = CGROUP_ROOT,
    ) -> None:
        self._agent = agent
        self._runtime = runtime
        self.period_s = period_s
        self._proc = proc
        self._cgroup_root = cgroup_root
        self._observer = observer
        self._pids: dict[str, int | None] = {}  # a running container's pid never changes
        # The container's cgroup, as its first process had it when first seen.
        self._cgroups: dict[str, str] = {}
        self._strays: dict[tuple[str, int], Stray] = {}
        self._strays_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None and self.period_s > 0:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="reconcile", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self.run_once()
            except Exception:  # the loop must outlive any one bad pass
                log.exception("reconcile pass failed; trying again in %.0fs", self.period_s)

    def strays(self) -> tuple[str, ...]:
        """The processes found outside their container's cgroup (for `status`)."""
        with self._strays_lock:
            return tuple(str(s) for s in self._strays.values())

    def run_once(self) -> Report:
        wanted = self._agent.wanted()
        live = {w.container_id for w in wanted}
        for gone in [cid for cid in self._pids if cid not in live]:
            del self._pids[gone]
            self._cgroups.pop(gone, None)
        with self._strays_lock:
            for key in [k for k in self._strays if k[0] not in live]:
                del self._strays[key]
        checked, repaired, resent = 0, [], 0
        for want in wanted:
            if self._stop.is_set():
                break
            if not want.cpus and not want.mems:
                continue  # not pinned (pin_cpus and pin_memory off): nothing to enforce
            action, reason = self._check(want)
            if action is Action.SKIP:
                continue
            checked += 1
            if action is Action.REPAIR:
                log.warning(
                    "%s (%s) does not run where the agent placed it: %s; sending cpus %s "
                    "mems %s again",
                    want.container_id,
                    want.who,
                    reason,
                    want.cpus or "-",
                    want.mems or "-",
                    extra={"container_id": want.container_id},
                )
                if self._agent.resend(want.container_id):
                    repaired.append(want.container_id)
                    if self._observer is not None:
                        self._observer.repaired()
            elif action is Action.OK:
                # Read back and right: an update whose outcome was unknown is known now.
                self._agent.confirm(want.container_id, str(want.cpus), str(want.mems))
            elif action is Action.RESEND and self._agent.resend(want.container_id):
                resent += 1
                if self._observer is not None:
                    self._observer.resent()
        return Report(checked, tuple(repaired), resent)

    def _check(self, want: Wanted) -> tuple[Action, str]:
        cid = want.container_id
        try:
            status = self._runtime.container_status(cid)
            if status.state != cri_pb2.CONTAINER_RUNNING:
                return Action.SKIP, "not running"  # created: starts right; exited: moot
            if cid not in self._pids:
                self._pids[cid] = self._runtime.container_pid(cid)
        except BackendError as err:
            if err.code != grpc.StatusCode.NOT_FOUND:
                log.debug("reconcile: cannot ask about %s: %s", cid, err)
            return Action.SKIP, str(err)
        problems = _reported_differs(want, status.resources.linux)
        pid = self._pids[cid]
        if pid is not None and cid not in self._cgroups:
            cgroup = cgroup_of(pid, self._proc)
            if cgroup is not None:
                self._cgroups[cid] = cgroup
        allowed = None if pid is None else self._allowed(want, pid)
        if allowed is not None:
            outside_cpus = allowed.cpus - want.cpus if want.cpus else CPUSet()
            outside_mems = allowed.mems - want.mems if want.mems else CPUSet()
            if outside_cpus:
                problems.append(f"the kernel lets it run on CPUs {outside_cpus}")
            if outside_mems:
                problems.append(f"the kernel lets it use memory nodes {outside_mems}")
        if problems:
            return Action.REPAIR, "; ".join(problems)
        if allowed is _EMPTY:
            return Action.OK, ""  # nothing runs in its cgroup (its processes all left)
        if allowed is None:
            return Action.RESEND, "the kernel's view cannot be read"
        if (want.cpus and allowed.cpus != want.cpus) or (want.mems and allowed.mems != want.mems):
            return Action.RESEND, "the kernel's view is narrower than the record"
        return Action.OK, ""

    def _allowed(self, want: Wanted, pid: int) -> Allowed | None:
        """What the kernel lets the container use: the union over every task in its
        cgroup (only its first process where the cgroup cannot be read); processes
        of it found outside the cgroup are reported, not counted."""
        cgroup = self._cgroups.get(want.container_id)
        tasks = None if cgroup is None else cgroup_tasks(cgroup, self._cgroup_root)
        if cgroup is None or tasks is None:
            return read_allowed(pid, self._proc)
        self._look_for_strays(want, cgroup, pid, tasks)
        views = [v for v in (read_allowed(t, self._proc) for t in tasks) if v is not None]
        if not views:
            return _EMPTY if not tasks else None
        cpus, mems = CPUSet(), CPUSet()
        for view in views:
            cpus, mems = cpus | view.cpus, mems | view.mems
        return Allowed(cpus, mems)

    def _look_for_strays(self, want: Wanted, cgroup: str, pid: int, tasks: list[int]) -> None:
        inside = set(tasks)
        for candidate in ({pid} | descendants([pid, *tasks], self._proc)) - inside:
            where = cgroup_of(candidate, self._proc)
            if where is None or where == cgroup or where.startswith(cgroup.rstrip("/") + "/"):
                continue
            stray = Stray(want.container_id, candidate, where)
            with self._strays_lock:
                if (want.container_id, candidate) in self._strays:
                    continue
                self._strays[(want.container_id, candidate)] = stray
            log.warning(
                "%s (%s): its process %d has left the container's cgroup %s for %s; no "
                "runtime call can move it back, so the agent cannot keep it to cpus %s "
                "(reported once)",
                want.container_id,
                want.who,
                candidate,
                cgroup,
                where,
                want.cpus or "-",
                extra={"container_id": want.container_id},
            )
            if self._observer is not None:
                self._observer.unrepairable()


# The kernel's view of a container none of whose processes is left in its cgroup.
_EMPTY = Allowed(CPUSet(), CPUSet())


def _reported_differs(want: Wanted, linux: cri_pb2.LinuxContainerResources) -> list[str]:
    out = []
    for name, wanted, text in (
        ("cpus", want.cpus, linux.cpuset_cpus),
        ("mems", want.mems, linux.cpuset_mems),
    ):
        if not wanted:
            continue
        try:
            reported = CPUSet.parse(text)
        except CPUSetError:
            reported = None
        if reported != wanted:
            out.append(f"the runtime reports {name} {text or '-'}")
    return out
