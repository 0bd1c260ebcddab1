"""What the kernel enforces for a process: the CPUs and memory nodes it may use.

Read from /proc/<pid>/status (`Cpus_allowed_list`, `Mems_allowed_list`), the
kernel's own view, which is what the agent's promise is about: a runtime can
report a cpuset it never applied. Read only; the agent never writes cgroups.
"""

from __future__ import annotations

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
