"""`numa-agent topology`: print the machine's tree as read from sysfs.

Text for a person by default, the documented JSON shape with --json, both with
each NUMA node's labels (the agent's and the operator's `numa_labels`) so a
user sees what node affinity can select; a broken sysfs tree is reported with
the file that was wrong and exit code 1. `--capture DIR` copies the files the
agent reads into DIR instead (topology.capture).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from agent.config import ConfigError, resolve_config
from agent.labels.numa import numa_node_labels
from agent.policy.config import check_numa_labels
from topology.capture import CaptureError, capture
from topology.render import render_text, topology_json
from topology.sysfs import REAL_SYSFS, SysfsError, read_machine


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "topology",
        help="print the machine's sockets, dies, NUMA nodes (with labels), L3 groups and cores",
        description="Print the machine's topology as read from sysfs, with each NUMA node's "
        "labels (the agent's and numa_labels from the configuration file).",
    )
    parser.add_argument(
        "--sysfs-root",
        default=str(REAL_SYSFS),
        metavar="DIR",
        help="sysfs root to read (default: /sys); a fake tree for tests and simulation",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="configuration file whose numa_labels to show "
        "(default /etc/numa-agent/config.yaml when it exists)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument(
        "--capture",
        metavar="DIR",
        help="copy the sysfs files the agent reads (and no others; symlinks made again, "
        "not followed) into DIR, a new or empty directory, for a bug report or for "
        "simulate and --sysfs-root to read",
    )
    parser.set_defaults(func=run)


def _capture(root: str, dest: str) -> int:
    try:
        captured = capture(root, dest)
    except CaptureError as exc:
        print(f"numa-agent topology: cannot capture: {exc}", file=sys.stderr)
        return 1
    print(
        f"captured {len(captured.files)} files and {len(captured.links)} symlinks "
        f"from {root} into {dest}; read it back with: numa-agent topology --sysfs-root {dest}"
    )
    for path in captured.skipped:
        print(f"numa-agent topology: not captured (outside {root}): {path}", file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    if args.capture is not None:
        return _capture(args.sysfs_root, args.capture)
    try:
        config = resolve_config(args.config, {})
    except ConfigError as exc:
        print(f"numa-agent topology: invalid configuration: {exc}", file=sys.stderr)
        return 2
    try:
        machine = read_machine(args.sysfs_root)
    except SysfsError as exc:
        print(f"numa-agent topology: {exc}", file=sys.stderr)
        return 1
    operator = config.policy.numa_labels
    try:
        check_numa_labels(operator, machine)
    except ConfigError as exc:  # shown anyway: this may be another machine's tree
        print(f"numa-agent topology: warning: {exc}", file=sys.stderr)
    labels = numa_node_labels(machine, operator)
    if args.json:
        print(json.dumps(topology_json(machine, labels), indent=2))
    else:
        sys.stdout.write(render_text(machine, labels))
    return 0
