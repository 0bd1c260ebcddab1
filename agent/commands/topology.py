"""`numa-agent topology`: print the machine's tree as read from sysfs.

Text for a person by default, the documented JSON shape with --json; a broken
sysfs tree is reported with the file that was wrong and exit code 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from topology.render import machine_to_json, render_text
from topology.sysfs import REAL_SYSFS, SysfsError, read_machine


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "topology",
        help="print the machine's sockets, dies, NUMA nodes, L3 groups and cores",
        description="Print the machine's topology as read from sysfs.",
    )
    parser.add_argument(
        "--sysfs-root",
        default=str(REAL_SYSFS),
        metavar="DIR",
        help="sysfs root to read (default: /sys); a fake tree for tests and simulation",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        machine = read_machine(args.sysfs_root)
    except SysfsError as exc:
        print(f"numa-agent topology: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(machine_to_json(machine), indent=2))
    else:
        sys.stdout.write(render_text(machine))
    return 0
