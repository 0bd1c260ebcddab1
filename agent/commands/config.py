"""`numa-agent config`: print the commented default configuration, or check a file."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

import yaml

from agent.commands.options import POLICY_HELP, add_config_flags, overrides
from agent.config import AGENT_KEYS, AgentConfig, ConfigError, resolve_config
from agent.policy.config import PolicyConfig


def _yaml_value(value: Any) -> str:
    if isinstance(value, tuple):
        value = list(value)
    elif isinstance(value, float) and value.is_integer():
        value = int(value)  # 10, not 10.0
    elif not isinstance(value, bool | int | float | str | list):
        value = str(value)
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def _lines(config: AgentConfig) -> list[str]:
    lines = ["# numa-agent configuration. Every key is also a flag: --key-name VALUE.", ""]
    for key, text in AGENT_KEYS.items():
        lines += [f"# {text}", f"{key}: {_yaml_value(getattr(config, key))}", ""]
    lines.append("# Placement policy")
    for f in dataclasses.fields(PolicyConfig):
        lines += [
            f"# {POLICY_HELP.get(f.name, f.name)}",
            f"{f.name}: {_yaml_value(getattr(config.policy, f.name))}",
            "",
        ]
    return lines


def render_config(config: AgentConfig) -> str:
    return "\n".join(_lines(config)).rstrip() + "\n"


def _run(args: argparse.Namespace) -> int:
    if args.defaults:
        sys.stdout.write(render_config(AgentConfig()))
        return 0
    try:
        config = resolve_config(args.config, overrides(args))
    except ConfigError as err:
        print(f"numa-agent: invalid configuration: {err}", file=sys.stderr)
        return 2
    sys.stdout.write(render_config(config))
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "config",
        help="print the default configuration, or the effective one after a file and flags",
        description="Without --defaults: validate the configuration file and flags and print "
        "the effective configuration (exit 2 with the bad key named when invalid).",
    )
    parser.add_argument("--defaults", action="store_true", help="print the commented defaults")
    add_config_flags(parser)
    parser.set_defaults(func=_run)
