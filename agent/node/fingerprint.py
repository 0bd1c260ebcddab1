"""The machine fingerprint the state file is bound to: a state written on another
topology (CPUs renumbered, a socket gone) must not be trusted."""

from __future__ import annotations

import hashlib
import json

from topology.render import machine_to_json
from topology.tree import Machine


def machine_fingerprint(machine: Machine) -> str:
    """sha256 of the machine's canonical JSON rendering."""
    text = json.dumps(machine_to_json(machine), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
