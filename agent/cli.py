"""The `numa-agent` command line: one sub-command per module in agent/commands.

Each command module has `register(subparsers)` that adds its parser and sets
`func` to a callable taking the parsed arguments and returning an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from agent import __version__

# Sub-command modules, in the order `--help` lists them.
COMMAND_MODULES: tuple[str, ...] = (
    "agent.commands.run",
    "agent.commands.topology",
    "agent.commands.labels",
    "agent.commands.config",
    "agent.commands.simulate",
    "agent.commands.status",
    "agent.commands.check",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="numa-agent",
        description="NUMA-aware container placement agent for Kubernetes worker nodes.",
    )
    parser.add_argument("--version", action="version", version=f"numa-agent {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        code: int = args.func(args)
    except BrokenPipeError:
        # `numa-agent topology --json | head`: the reader left; not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return code


if __name__ == "__main__":
    sys.exit(main())
