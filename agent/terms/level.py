"""The levels of the machine's tree where a term holds.

Kubernetes' `topologyKey` names a node label whose value groups nodes into
domains; inside one machine the domains are its parts, from a core up to the
whole machine (`kubernetes.io/hostname`: one domain, as for a node in the cluster).
"""

from __future__ import annotations

from enum import StrEnum


class Level(StrEnum):
    """A topology level, finest first; its value is the topology key that names it."""

    CORE = "numa-agent.io/core"
    L3 = "numa-agent.io/l3"
    NUMA = "numa-agent.io/numa"
    DIE = "numa-agent.io/die"
    SOCKET = "numa-agent.io/socket"
    HOST = "kubernetes.io/hostname"

    @property
    def word(self) -> str:
        """What messages call one domain of the level: `NUMA node`, `L3 group`."""
        return _WORDS[self]


_WORDS = {
    Level.CORE: "core",
    Level.L3: "L3 group",
    Level.NUMA: "NUMA node",
    Level.DIE: "die",
    Level.SOCKET: "socket",
    Level.HOST: "machine",
}

LEVEL_KEYS = ", ".join(level.value for level in Level)
