"""`numa-agent status`: ask the running agent where every container is and what is free."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agent.config import ConfigError, resolve_config
from agent.introspect.client import StatusError, fetch_status
from agent.introspect.cpu_map import MapError
from agent.introspect.machine_map import render_machine_map
from agent.introspect.render import render_status
from agent.introspect.server import status_socket_path


def _status(args: argparse.Namespace) -> int:
    try:
        config = resolve_config(args.config, {"listen": args.listen})
        path = status_socket_path(config.listen)
    except ConfigError as err:
        print(f"numa-agent status: invalid configuration: {err}", file=sys.stderr)
        return 2
    try:
        document = fetch_status(path, timeout=args.timeout)
    except StatusError as err:
        print(f"numa-agent status: {err}", file=sys.stderr)
        return 1
    if args.html is not None:
        try:
            page = render_machine_map(document)
            args.html.write_text(page, encoding="utf-8")
        except MapError as err:
            print(f"numa-agent status: cannot draw the machine map: {err}", file=sys.stderr)
            return 1
        except OSError as err:
            print(f"numa-agent status: cannot write {args.html}: {err}", file=sys.stderr)
            return 1
    if args.json:
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.html is None:
        sys.stdout.write(render_status(document))
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "status",
        help="show the running agent: every container in its pool, free capacity per pool",
        description="Ask the running agent (over the root-only socket next to its CRI socket, "
        "<listen dir>/<listen name>-status.sock) for its pools, the containers in each with "
        "their cpusets, the free capacity of each pool, and the agent's own health; "
        "--html draws it as a map of the machine. Exit 1 when no agent answers.",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="the agent's configuration file, to find its socket "
        "(default /etc/numa-agent/config.yaml when it exists)",
    )
    parser.add_argument("--listen", metavar="LISTEN", help="the agent's CRI socket (as for run)")
    parser.add_argument("--json", action="store_true", help="print the status document as JSON")
    parser.add_argument(
        "--html",
        metavar="FILE",
        type=Path,
        help="write the machine map (one self-contained HTML page) to FILE instead of "
        "printing the pool tree",
    )
    parser.add_argument(
        "--timeout", type=float, default=5.0, metavar="SECONDS", help="how long to wait (5)"
    )
    parser.set_defaults(func=_status)
