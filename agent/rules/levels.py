"""The levels of the machine's tree a rule names as its topology key.

Kubernetes' `topologyKey` names a node label whose value groups nodes into
domains; inside one machine the domains are its parts, from a core up to the
whole machine (`kubernetes.io/hostname`: one domain, as for a node in the cluster).
"""

from __future__ import annotations

from enum import StrEnum

from agent.rules.errors import PathError, quote


class Level(StrEnum):
    """A topology level, finest first. Any other topology key is refused."""

    CORE = "numa-agent.io/core"
    L3 = "numa-agent.io/l3"
    NUMA = "numa-agent.io/numa"
    DIE = "numa-agent.io/die"
    SOCKET = "numa-agent.io/socket"
    HOST = "kubernetes.io/hostname"


LEVEL_KEYS = ", ".join(level.value for level in Level)


def parse_level(value: str, path: str) -> Level:
    """The level a topology key names; PathError naming the allowed keys otherwise."""
    try:
        return Level(value)
    except ValueError:
        pass
    if not value:
        raise PathError(path, f"is empty; it is one of {LEVEL_KEYS}")
    hint = ""
    if value.startswith("topology.kubernetes.io/"):
        hint = " (a cluster topology key; inside the node the levels are the machine's parts)"
    raise PathError(path, f"{quote(value)} is not a level{hint}; use one of {LEVEL_KEYS}")
