"""`numa-agent simulate` through agent.cli.main: JSON shape, text, --explain, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CONTAINER_KEYS = ["namespace", "pod", "name", "cpuset_cpus", "cpuset_mems", "exclusive", "pool"]
ERROR_KEYS = ["namespace", "pod", "name", "code", "message"]


def test_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(EXAMPLES / "refusals.yaml"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["containers", "errors"]
    assert out["containers"] and out["errors"]
    for entry in out["containers"]:
        assert list(entry) == CONTAINER_KEYS
        assert isinstance(entry["exclusive"], bool)
        assert all(isinstance(entry[k], str) for k in CONTAINER_KEYS if k != "exclusive")
    for entry in out["errors"]:
        assert list(entry) == ERROR_KEYS
        assert entry["code"] in ("RESOURCE_EXHAUSTED", "INVALID_ARGUMENT")
    fine = next(c for c in out["containers"] if c["name"] == "fine")
    assert (fine["namespace"], fine["pod"], fine["exclusive"]) == ("default", "greedy", True)


def test_text_output_has_table_refusals_and_tree(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(EXAMPLES / "anti-affinity.yaml")]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("NAMESPACE"))
    assert header.split() == ["NAMESPACE", "POD", "CONTAINER", "CPUS", "MEMS", "EXCLUSIVE", "POOL"]
    assert "where they run:" in out
    # Each replica is listed once in the table and once under its NUMA node.
    for i in range(4):
        assert sum(f"web-{i}" in line for line in lines) == 2
    assert [line.split()[0] for line in lines if line.startswith("socket")] == ["socket"] * 2


def test_text_output_lists_refusals(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(EXAMPLES / "refusals.yaml")]) == 0
    out = capsys.readouterr().out
    assert "refused:" in out
    assert "default/greedy/huge: RESOURCE_EXHAUSTED: " in out


def test_explain_prints_every_decision(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(EXAMPLES / "affinity.yaml"), "--explain"]) == 0
    out = capsys.readouterr().out
    for pod in ("queue", "log", "cache", "client"):
        assert f"default/{pod}/main -> numa" in out
    assert "candidates:" in out


def test_explain_with_json_keeps_stdout_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(EXAMPLES / "affinity.yaml"), "--json", "--explain"]) == 0
    captured = capsys.readouterr()
    assert len(json.loads(captured.out)["containers"]) == 4
    assert "default/client/main -> " in captured.err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("topology: {shape: nope}\npods: [{name: a, containers: [{name: b}]}]\n", "topology.shape"),
        ("topology: {sockets: 1}\npods: [{name: a, containers: [{name: b, cpu: x}]}]\n", "cpu"),
    ],
)
def test_bad_scenario_exits_1_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert main(["simulate", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"numa-agent simulate: {path}: ")
    assert message in captured.err
