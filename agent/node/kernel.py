"""What the kernel enforces for a process: the CPUs and memory nodes it may use.

Read from /proc/<pid>/status (`Cpus_allowed_list`, `Mems_allowed_list`), the
kernel's own view, which is what the agent's promise is about: a runtime can
report a cpuset it never applied. Read only; the agent never writes cgroups.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from topology.cpuset import CPUSet, CPUSetError

PROC = Path("/proc")


@dataclass(frozen=True, slots=True)
class Allowed:
    cpus: CPUSet
    mems: CPUSet


def read_allowed(pid: int, proc: Path = PROC) -> Allowed | None:
    """The process's allowed CPUs and memory nodes, or None if it cannot be read (gone,
    not visible from this pid namespace, or not a Linux /proc)."""
    try:
        text = (proc / str(pid) / "status").read_text()
    except (OSError, UnicodeDecodeError):
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    try:
        return Allowed(
            CPUSet.parse(fields["Cpus_allowed_list"].strip()),
            CPUSet.parse(fields["Mems_allowed_list"].strip()),
        )
    except (KeyError, CPUSetError):
        return None


def read_back(
    pid_of: Callable[[str], int | None], container_id: str, proc: Path = PROC
) -> tuple[str, str] | None:
    """What the kernel lets the container's first process use, as (cpus, mems) in
    list form; None if its pid is not reported or its /proc entry cannot be read."""
    pid = pid_of(container_id)
    allowed = None if pid is None else read_allowed(pid, proc)
    return None if allowed is None else (str(allowed.cpus), str(allowed.mems))


CGROUP_ROOT = Path("/sys/fs/cgroup")
# A container's process tree is walked at most this far (a fork bomb must not make
# the reconcile read without bound).
MAX_PROCESSES = 4096


def cgroup_of(pid: int, proc: Path = PROC) -> str | None:
    """The process's cgroup in the hierarchy that holds its cpuset: the v1 `cpuset`
    controller's, else the v2 unified one; None if it cannot be read."""
    try:
        text = (proc / str(pid) / "cgroup").read_text()
    except (OSError, UnicodeDecodeError):
        return None
    unified = None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if "cpuset" in controllers.split(","):
            return path
        if parts[0] == "0" and not controllers:
            unified = path
    return unified


def cgroup_tasks(cgroup: str, root: Path = CGROUP_ROOT) -> list[int] | None:
    """Every task (thread) in the cgroup: cgroup v1's cpuset `tasks`, or v2's
    `cgroup.threads`; None if neither can be read."""
    relative = cgroup.lstrip("/")
    for path in (root / "cpuset" / relative / "tasks", root / relative / "cgroup.threads"):
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError):
            continue
        return [int(t) for t in text.split() if t.isdigit()][:MAX_PROCESSES]
    return None


def descendants(pids: list[int], proc: Path = PROC) -> set[int]:
    """Every process below `pids` (by /proc/<pid>/task/<tid>/children), at most
    MAX_PROCESSES; `pids` themselves are not included unless one is another's child."""
    seen: set[int] = set()
    todo = list(pids)
    while todo and len(seen) < MAX_PROCESSES:
        pid = todo.pop()
        try:
            tasks = list((proc / str(pid) / "task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                children = (task / "children").read_text().split()
            except (OSError, UnicodeDecodeError):
                continue
            for child in children:
                if child.isdigit() and int(child) not in seen:
                    seen.add(int(child))
                    todo.append(int(child))
    return seen
