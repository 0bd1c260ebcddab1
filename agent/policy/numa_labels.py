"""The labels each NUMA node carries for node affinity (placeholder until agent/labels)."""

from __future__ import annotations

from collections.abc import Mapping

from agent.policy.config import PolicyConfig
from topology.tree import Machine


def numa_label_sets(machine: Machine, config: PolicyConfig) -> Mapping[int, Mapping[str, str]]:
    out: dict[int, dict[str, str]] = {}
    for socket in machine.sockets:
        for node in socket.numa_nodes:
            out[node.id] = {
                "numa-agent.io/numa": str(node.id),
                "numa-agent.io/socket": str(socket.id),
            }
    return out
