"""`numa-agent labels`: the node's labels for the cluster, or its NodeResourceTopology.

`nfd` (the default) is exactly the feature file the daemon writes for Node
Feature Discovery; `json` the same labels as an object; `noderesourcetopology`
the object for topology-aware scheduling, with what is available now when the
agent runs (asked over its status socket, as `numa-agent status` does).
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from typing import Any

import yaml

from agent.commands.options import add_config_flags, overrides
from agent.config import AgentConfig, ConfigError, resolve_config
from agent.introspect.client import AgentNotRunning, StatusError, fetch_status
from agent.introspect.server import status_socket_path
from agent.labels.nfd import feature_file_text
from agent.labels.nrt import node_resource_topology
from agent.labels.sources import LabelSourceError, current_node_labels
from agent.labels.usage import NodeUse, UsageError, node_use
from topology.dmi import read_dmi
from topology.sysfs import SysfsError, read_machine
from topology.tree import Machine

FORMATS = ("nfd", "json", "noderesourcetopology")
PROG = "numa-agent labels"


def _warn(text: str) -> None:
    print(f"{PROG}: {text}", file=sys.stderr)


def _running_use(
    config: AgentConfig, machine: Machine, timeout: float
) -> dict[int, NodeUse] | None:
    """What the running agent's containers take per NUMA node; None (said why) without it."""
    path = status_socket_path(config.listen)
    try:
        return node_use(fetch_status(path, timeout=timeout), machine)
    except AgentNotRunning:
        _warn(f"no agent answers on {path}; available = allocatable")
    except (StatusError, UsageError) as err:
        _warn(f"cannot use the running agent's status ({err}); available = allocatable")
    return None


def _run(args: argparse.Namespace) -> int:
    try:
        config = resolve_config(args.config, overrides(args))
    except ConfigError as err:
        _warn(f"invalid configuration: {err}")
        return 2
    try:
        machine = read_machine(config.sysfs_root, cpu_info=False)
    except SysfsError as err:
        _warn(str(err))
        return 1
    fmt = "json" if args.json else args.format
    if fmt == "noderesourcetopology":
        document = node_resource_topology(
            machine,
            node_name=args.node_name or socket.gethostname().lower(),
            reserved_cpus=config.policy.reserved_cpus,
            use=_running_use(config, machine, args.timeout),
        )
        sys.stdout.write(yaml.safe_dump(document, sort_keys=False))
        return 0
    try:
        computed = current_node_labels(
            machine,
            read_dmi(config.sysfs_root),
            physical_host_id=config.physical_host_id,
            label_salt=config.label_salt,
        )
    except LabelSourceError as err:
        _warn(str(err))
        return 1
    if not computed.has_physical_host:
        _warn(computed.note)
    if fmt == "json":
        json.dump(computed.labels, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(feature_file_text(computed.labels))
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "labels",
        help="print the node's labels (NFD feature file, JSON) or its NodeResourceTopology",
        description="Print the node's labels as the agent publishes them for Node Feature "
        "Discovery (one name=value per line, sorted), as JSON, or the node's "
        "NodeResourceTopology object (YAML, for kubectl apply). Reads sysfs and the "
        "configuration; a missing physical-host label is explained on stderr. "
        "See docs/cluster-labels.md.",
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="nfd",
        help="nfd (default): the feature file; json: an object; "
        "noderesourcetopology: the NodeResourceTopology object",
    )
    parser.add_argument("--json", action="store_true", help="same as --format json")
    parser.add_argument(
        "--node-name",
        metavar="NAME",
        help="the Kubernetes node name for noderesourcetopology (default: the host name, "
        "lowercased, as kubelet names the node)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="how long to wait for the running agent's status (noderesourcetopology; 5)",
    )
    add_config_flags(parser)
    parser.set_defaults(func=_run)
