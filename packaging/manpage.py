"""numa-agent(8): the man page, rendered in roff from the command line's own parser.

Generated from agent.cli.build_parser at package build time, so every command
and flag in `--help` is in the man page and the two cannot drift apart.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence

FILES = (
    ("/etc/numa-agent/config.yaml", "The configuration file (`numa-agent config --defaults`)."),
    ("/var/lib/numa-agent", "State: which container runs where, kept across restarts."),
    ("/var/run/numa-agent/numa-agent.sock", "The CRI socket kubelet connects to."),
    ("/lib/systemd/system/numa-agent.service", "The systemd unit."),
)


def escape(text: str) -> str:
    """Roff-safe text: backslashes and hyphens escaped, no line starting a request."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    lines = [("\\&" + line) if line.startswith((".", "'")) else line for line in text.split("\n")]
    return "\n".join(lines)


def _help(action: argparse.Action) -> str:
    text = action.help or ""
    if "%(" in text:
        text = text % {**vars(action), "default": action.default}
    return text


def invocation(action: argparse.Action) -> str:
    """`-h, --help` or `--config FILE`, as --help shows an option."""
    names = ", ".join(action.option_strings)
    if action.nargs == 0:
        return names
    metavar = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
    return f"{names} {metavar}"


def _options(parser: argparse.ArgumentParser) -> Iterator[str]:
    for action in parser._actions:  # argparse has no public way to list its actions
        if not action.option_strings or action.help == argparse.SUPPRESS:
            continue
        yield ".TP"
        yield f"\\fB{escape(invocation(action))}\\fR"
        yield escape(_help(action))


def _positionals(parser: argparse.ArgumentParser) -> Iterator[str]:
    for action in parser._actions:
        if action.option_strings or isinstance(action, argparse._SubParsersAction):
            continue
        yield ".TP"
        name = action.metavar if isinstance(action.metavar, str) else action.dest
        yield f"\\fI{escape(name)}\\fR"
        yield escape(_help(action))


def subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each sub-command, in --help order."""
    found: list[tuple[str, str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            found += [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]
    return found


def render_manpage(parser: argparse.ArgumentParser, version: str, date: str) -> str:
    """The whole page in roff (man macros), section 8."""
    prog = parser.prog
    lines = [
        f'.TH {prog.upper()} 8 "{date}" "{prog} {version}" "System Administration"',
        ".SH NAME",
        f"{escape(prog)} \\- {escape(parser.description or '')}",
        ".SH SYNOPSIS",
        f"\\fB{escape(prog)}\\fR [\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]",
        ".SH DESCRIPTION",
        escape(
            "numa-agent sits between kubelet and the container runtime (containerd or CRI-O) "
            "as a proxy on the CRI socket, and writes the CPUs and memory nodes that suit each "
            "container's affinities into its CreateContainer request. Under systemd it runs as "
            "numa-agent.service; kubelet's --container-runtime-endpoint points at its socket."
        ),
        ".SH OPTIONS",
        *_options(parser),
        ".SH COMMANDS",
    ]
    for name, summary, sub in subcommands(parser):
        lines += [f".SS {escape(prog)} {escape(name)}", escape(summary)]
        if sub.description:
            lines += [".PP", escape(sub.description)]
        lines += [*_positionals(sub), *_options(sub)]
    lines.append(".SH FILES")
    for path, text in FILES:
        lines += [".TP", f"\\fI{escape(path)}\\fR", escape(text)]
    lines += [".SH SEE ALSO", "\\fBkubelet\\fR(1), \\fBsystemctl\\fR(1), \\fBcontainerd\\fR(8)"]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    from agent import __version__
    from agent.cli import build_parser

    cli = argparse.ArgumentParser(description="Print numa-agent(8) in roff.")
    cli.add_argument("--date", default="", help="date in the page footer (default: none)")
    args = cli.parse_args(argv)
    sys.stdout.write(render_manpage(build_parser(), __version__, args.date))
    return 0


if __name__ == "__main__":
    sys.exit(main())
