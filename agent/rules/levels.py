"""The levels of the machine's tree a rule names as its topology key.

Kubernetes' `topologyKey` names a node label whose value groups nodes into
domains; inside one machine the domains are its parts, from a core up to the
whole machine (`kubernetes.io/hostname`: one domain, as for a node in the cluster).
"""

from __future__ import annotations

from agent.rules.errors import PathError, quote
from agent.terms.level import LEVEL_KEYS, Level

__all__ = ["LEVEL_KEYS", "Level", "parse_level"]


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
