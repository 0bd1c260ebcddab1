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
