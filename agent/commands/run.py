"""`numa-agent run`: the node agent kubelet talks to (see agent/daemon.py)."""

from __future__ import annotations

import argparse
import logging
import sys

from agent.commands.options import add_config_flags, overrides
from agent.config import ConfigError, resolve_config
from agent.daemon import Daemon, StartupError, serve
from agent.logs import setup_logging
from agent.relay.listen import ListenError

log = logging.getLogger("agent")


def _run(args: argparse.Namespace) -> int:
    flags = overrides(args)
    try:
        config = resolve_config(args.config, flags)
    except ConfigError as err:
        print(f"numa-agent: invalid configuration: {err}", file=sys.stderr)
        return 2
    setup_logging(config.log_level, config.log_format)
    daemon = Daemon(config, args.config, flags, runtime_wait_s=args.runtime_wait)
    try:
        return serve(daemon)
    except (StartupError, ListenError) as err:
        log.error("cannot start: %s", err)
        return 1


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "run",
        help="serve the CRI socket kubelet uses (or plug into the runtime's NRI socket)",
        description="Start the node agent: kubelet's --container-runtime-endpoint points at "
        "--listen; every CRI call is relayed to --runtime-endpoint, with cpusets chosen by the "
        "placement policy. With --nri-socket the agent is instead an NRI plugin of the runtime "
        "(kubelet unchanged; no CRI socket unless --listen is given). SIGTERM stops cleanly, "
        "SIGHUP reloads the configuration file.",
    )
    add_config_flags(parser)
    parser.add_argument(
        "--runtime-wait",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long to wait at start for the runtime to answer Version (default 30)",
    )
    parser.set_defaults(func=_run)
