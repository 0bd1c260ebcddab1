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
from agent.node.kernel import PROC, read_allowed
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
    """Told of every repair and re-send (metrics)."""

    def repaired(self) -> None: ...

    def resent(self) -> None: ...


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
    ) -> None:
        self._agent = agent
        self._runtime = runtime
        self.period_s = period_s
        self._proc = proc
        self._observer = observer
        self._pids: dict[str, int | None] = {}  # a running container's pid never changes
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

    def run_once(self) -> Report:
        wanted = self._agent.wanted()
        live = {w.container_id for w in wanted}
        for gone in [cid for cid in self._pids if cid not in live]:
            del self._pids[gone]
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
        allowed = None if pid is None else read_allowed(pid, self._proc)
        if allowed is not None:
            outside_cpus = allowed.cpus - want.cpus if want.cpus else CPUSet()
            outside_mems = allowed.mems - want.mems if want.mems else CPUSet()
            if outside_cpus:
                problems.append(f"the kernel lets it run on CPUs {outside_cpus}")
            if outside_mems:
                problems.append(f"the kernel lets it use memory nodes {outside_mems}")
        if problems:
            return Action.REPAIR, "; ".join(problems)
        if allowed is None:
            return Action.RESEND, "the kernel's view cannot be read"
        if (want.cpus and allowed.cpus != want.cpus) or (want.mems and allowed.mems != want.mems):
            return Action.RESEND, "the kernel's view is narrower than the record"
        return Action.OK, ""


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
