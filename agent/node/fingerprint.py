"""The machine fingerprint the state file is bound to: a state written on another
topology (CPUs renumbered, a socket gone) must not be trusted.

It holds what placements depend on: the CPUs (online, offline, isolated), their
cores, L3 groups, dies, sockets and NUMA nodes, and the nodes' distances. Not
memory sizes: a VM's memory grows and shrinks (ballooning, hotplug) without any
placement becoming wrong, and the agent re-reads the sizes at every start. So a
restart after a memory change keeps the state file.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from topology.render import machine_to_json
from topology.tree import Machine

# Keys of the topology's JSON that may change without any placement becoming wrong.
_NOT_PLACEMENT = frozenset({"memory_bytes", "cpu_model"})


def _placement_view(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _placement_view(v) for k, v in value.items() if k not in _NOT_PLACEMENT}
    if isinstance(value, list):
        return [_placement_view(v) for v in value]
    return value


def _digest(document: Any) -> str:
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def machine_fingerprint(machine: Machine) -> str:
    """sha256 of what placements depend on in the machine's canonical JSON rendering."""
    return _digest(_placement_view(machine_to_json(machine)))


def legacy_fingerprint(machine: Machine) -> str:
    """The fingerprint state files of earlier versions carry (the whole rendering,
    memory sizes included): such a file written on this machine is still read."""
    return _digest(machine_to_json(machine))
