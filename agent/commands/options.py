"""Command-line flags for every configuration key, shared by `run`, `check` and `config`.

Flags are generated from the key tables, so a key added to the configuration
is a flag at once and the two can never spell an option differently.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from agent.config import AGENT_KEYS
from agent.policy.config import PolicyConfig

POLICY_HELP: dict[str, str] = {
    "reserved_cpus": "CPUs kept for the reserved namespaces (Linux list, e.g. 0,40)",
    "reserved_namespaces": "comma-separated namespaces whose containers run on reserved_cpus",
    "pin_cpus": "write cpuset_cpus into containers",
    "pin_memory": "write cpuset_mems (memory nodes) into containers",
    "colocate_pods": "pull containers of the same pod together",
    "colocate_namespaces": "pull containers of the same namespace together",
    "colocate_weight": "weight of the implicit colocation pull",
    "isolated_for_exclusive": "hand kernel-isolated CPUs to exclusive containers unasked",
    "symmetric_affinity": "also count placed containers' rules toward a newcomer",
    "system_namespaces": "comma-separated namespaces whose pods are invisible to required "
    "pod anti-affinity (daemons)",
    "exclusive_domain_namespaces": "comma-separated namespaces whose pods may hold a "
    "required anti-affinity to every pod above the core level",
    "numa_labels": 'your labels per NUMA node, e.g. {"3": {"example.com/storage": "nvme"}}',
}


def flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="configuration file (default /etc/numa-agent/config.yaml when it exists)",
    )
    group = parser.add_argument_group("configuration (each also a key of the config file)")
    for key, text in AGENT_KEYS.items():
        group.add_argument(flag(key), dest=key, metavar=key.upper(), help=text)
    for f in dataclasses.fields(PolicyConfig):
        text = POLICY_HELP.get(f.name, f.name)
        if isinstance(f.default, bool):
            group.add_argument(
                flag(f.name), dest=f.name, action=argparse.BooleanOptionalAction, help=text
            )
        elif isinstance(f.default, int):
            group.add_argument(flag(f.name), dest=f.name, type=int, metavar="N", help=text)
        else:
            group.add_argument(flag(f.name), dest=f.name, metavar=f.name.upper(), help=text)


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The configuration values given as flags (None = not given)."""
    keys = [*AGENT_KEYS, *(f.name for f in dataclasses.fields(PolicyConfig))]
    return {key: getattr(args, key) for key in keys if getattr(args, key, None) is not None}
