"""The README's examples work as written: its numa-agent commands run through the
real CLI, its annotation YAML parses, its configuration YAML validates."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agent.affinity import parse_pod_affinities
from agent.cli import main
from agent.config import config_from_mapping
from agent.rules import parse_pod_rules

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
# Sub-commands safe to run here (no daemon, no root): the ones users try first.
RUNNABLE = ("simulate", "check", "topology", "config")


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, re.DOTALL)


def commands() -> list[tuple[str, int]]:
    found = []
    for block in blocks("sh"):
        for line in block.splitlines():
            command, _, comment = line.partition("#")
            if not command.startswith(".venv/bin/"):
                continue  # install steps (sudo, systemctl) are not for this machine
            words = shlex.split(command)
            if words[:1] == [".venv/bin/python"] or (
                words[:1] == [".venv/bin/numa-agent"] and words[1] in RUNNABLE
            ):
                expected = 1 if re.search(r"\bexit 1\b", comment) else 0
                found.append((command.strip(), expected))
    return found


def test_the_readme_has_runnable_examples() -> None:
    names = " ".join(c for c, _ in commands())
    for sub in RUNNABLE[:3]:
        assert f"numa-agent {sub}" in names


def test_readme_commands_run_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Examples write /tmp/xeon; run them against a private copy of that path.
    monkeypatch.chdir(ROOT)
    for command, expected in commands():
        command = command.replace("/tmp/xeon", str(tmp_path / "xeon"))
        words = shlex.split(command)
        if words[0] == ".venv/bin/python":
            done = subprocess.run([sys.executable, *words[1:]], cwd=ROOT, capture_output=True)
            assert done.returncode == expected, (command, done.stderr)
            continue
        code = main(words[1:])
        out = capsys.readouterr()
        assert code == expected, (command, out.err)
        assert out.out or out.err


def test_annotation_examples_parse() -> None:
    seen = 0
    for block in blocks("yaml"):
        data = yaml.safe_load(block)
        annotations = (data.get("metadata") or {}).get("annotations") if data else None
        if annotations:
            # Each example speaks one of the two languages: cri-resource-manager's
            # annotations, or the numa-agent.io rules in Kubernetes' shapes.
            result = parse_pod_affinities(annotations)
            assert not result.errors, result.errors
            assert result.has_rules or not parse_pod_rules(annotations).is_empty
            seen += 1
    assert seen


def test_configuration_example_is_valid() -> None:
    configs = [yaml.safe_load(b) for b in blocks("yaml") if "runtime_endpoint" in b]
    assert configs
    for data in configs:
        config_from_mapping(data)
