"""numa-agent(8): generated from the real parser, so every command and flag is in it;
valid roff that groff renders without a warning."""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess

import pytest

from agent.cli import build_parser
from tests.packaging.helpers import load_script, require

manpage = load_script("manpage")


@pytest.mark.parametrize(
    ("text", "roff"),
    [
        ("--listen", "\\-\\-listen"),
        ("a\\b", "a\\eb"),
        (".TH at the start", "\\&.TH at the start"),
        ("'quote first", "\\&'quote first"),
        ("one\n.two", "one\n\\&.two"),
        ("mid.dle", "mid.dle"),
    ],
)
def test_escape(text: str, roff: str) -> None:
    assert manpage.escape(text) == roff


def all_options(parser: argparse.ArgumentParser) -> list[str]:
    return [opt for action in parser._actions for opt in action.option_strings]


def test_every_command_and_flag_is_in_the_page() -> None:
    parser = build_parser()
    page = manpage.render_manpage(parser, "9.9", "2024-01-01")
    commands = manpage.subcommands(parser)
    assert {name for name, _, _ in commands} >= {"run", "topology", "config", "simulate"}
    for name, summary, sub in commands:
        assert f".SS numa\\-agent {name}\n{manpage.escape(summary)}\n" in page
        for option in all_options(sub):
            assert manpage.escape(option) in page, (name, option)
    assert page.startswith('.TH NUMA-AGENT 8 "2024-01-01" "numa-agent 9.9"')


def test_groff_renders_it_without_warnings() -> None:
    require([] if shutil.which("groff") else ["groff"], "rendering the man page")
    page = manpage.render_manpage(build_parser(), "9.9", "")
    result = subprocess.run(
        ["groff", "-man", "-Tascii", "-ww"], input=page, capture_output=True, text=True, check=True
    )
    assert result.stderr == ""
    text = re.sub(".\b", "", result.stdout)  # bold and underline are overstrikes
    for expected in ("numa-agent run", "--runtime-endpoint", "/etc/numa-agent/config.yaml"):
        assert expected in text, expected
