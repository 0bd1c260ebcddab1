"""`numa-agent check` on annotations written for cri-resource-manager: it accepts
what that code accepts (joint keys with ":" and "-" separators), prints the rules
the shorthand mirrors, and warns where a habit from there reads differently here
("*" in Equals) or does nothing (a malformed glob)."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.cli import main
from devtools.fakesysfs import write_shape
from topology.cpuset import CPUSet

PODS = Path(__file__).resolve().parents[2] / "examples" / "pods"
AFF = "cri-resource-manager.intel.com/affinity"
ANTI = "cri-resource-manager.intel.com/anti-affinity"
MIRRORED = "(scope: its pod; mirrored from the shorthand of"


@pytest.fixture(scope="module")
def sysfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield write_shape("xeon-2s-2numa", tmp_path_factory.mktemp("check-crm") / "sysfs")


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["check", *args])
    return code, capsys.readouterr().out


def test_manifest_from_cri_resource_manager(
    sysfs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(PODS / "from-cri-resource-manager.yaml")
    code, out = run([path], capsys)
    assert code == 0 and "ok: the agent accepts" in out and "warning" not in out
    assert (
        "rule of backup: affinity +1 on labels/io.kubernetes.container.name In [server] "
        f"{MIRRORED} server)" in out
    )
    assert ":,:pod/qosclass,pod/labels/app,name Equals [Burstable:db:server]" in out

    code, out = run([path, "--simulate", "--sysfs-root", str(sysfs)], capsys)
    assert code == 0
    rows = {
        (line.split()[1], line.split()[2]): line.split()
        for line in out.splitlines()
        if line.startswith("shop ")
    }
    assert set(rows) == {(f"db-{i}", c) for i in (0, 1) for c in ("server", "backup")}
    socket0 = CPUSet.parse("0-19,40-59")
    servers = [CPUSet.parse(rows[f"db-{i}", "server"][3]) for i in (0, 1)]
    assert servers[0].is_subset(socket0) != servers[1].is_subset(socket0)  # apart
    for i in (0, 1):  # each backup on its server's NUMA node (the MEMS column)
        assert rows[f"db-{i}", "backup"][4] == rows[f"db-{i}", "server"][4]


def test_habits_from_cri_resource_manager_are_warned_about(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = run([str(PODS / "cri-resource-manager-habits.yaml")], capsys)
    assert code == 0 and "ok: the agent accepts" in out
    warnings = [line for line in out.splitlines() if line.startswith("  warning:")]
    assert len(warnings) == 2
    assert '"*" is compared as it is; cri-resource-manager took it for any value' in warnings[0]
    assert "pattern '[]a]'" in warnings[1] and "never makes MatchesNot false" in warnings[1]


POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: app
  annotations:
{annotations}
spec:
  containers:
    - name: main
      resources: {{limits: {{cpu: "2", memory: 1Gi}}}}
    - name: side
      resources: {{requests: {{cpu: 250m}}}}
"""


def rule(match: str) -> str:
    return f"main:\n- scope: {{operator: AlwaysTrue}}\n  match: {match}\n"


# (annotation, its text, exit code, what the output says)
CASES = [
    # Item 1: a full-form joint key whose value separator is ":".
    (AFF, rule('{key: ":,:pod/name,name", operator: Equals, values: ["app:side"]}'), 0, "ok:"),
    # Item 3: "-" and "_" separate.
    (AFF, rule('{key: ":-_pod/name-name", operator: Exists}'), 0, "ok:"),
    (
        AFF,
        rule('{key: ":-pod/name-name", operator: Exists}'),
        1,
        "a full-form joint key starts with two separators",
    ),
    # Item 4: the shorthand is symmetric; written both ways it is still one rule each.
    (AFF, "main: [side]\n", 0, "rule of side: affinity +1 on "),
    (AFF, "main: [side]\n", 0, f"In [main] {MIRRORED} main)"),
    (ANTI, "main: [side]\n", 0, "rule of side: anti-affinity -1 on "),
    (AFF, "main: [ghost]\n", 0, "warning: the shorthand of 'main' names container 'ghost'"),
    # Item 5: Go's globs; a malformed one is accepted but warned about.
    (AFF, rule('{key: name, operator: Matches, values: ["[^m]ide"]}'), 0, "ok:"),
    (AFF, rule('{key: name, operator: MatchesAny, values: ["[a-]", "s*"]}'), 0, "pattern '[a-]'"),
    (AFF, rule('{key: name, operator: In, values: ["*", x]}'), 0, '"*" is compared as it is'),
]


@pytest.mark.parametrize(("annotation", "text", "code", "needle"), CASES)
def test_check_shows_it(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    annotation: str,
    text: str,
    code: int,
    needle: str,
) -> None:
    block = textwrap.indent(f"{annotation}: |\n" + textwrap.indent(text, "  "), "    ")
    path = tmp_path / "pod.yaml"
    path.write_text(POD.format(annotations=block))
    got, out = run([str(path)], capsys)
    assert (got, needle in out) == (code, True), out


def test_a_pair_written_both_ways_prints_no_mirrored_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    block = textwrap.indent(f"{AFF}: |\n  main: [side]\n  side: [main]\n", "    ")
    path = tmp_path / "pod.yaml"
    path.write_text(POD.format(annotations=block))
    code, out = run([str(path)], capsys)
    assert code == 0 and "mirrored" not in out
    assert out.count("rule of ") == 2
