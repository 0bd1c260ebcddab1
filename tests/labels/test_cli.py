"""`numa-agent labels`: the feature file, JSON, the NodeResourceTopology, and errors."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from agent.cli import main
from agent.labels.nfd import HEADER, parse_feature_file
from agent.labels.node import PHYSICAL_HOST, VIRTUAL
from topology.shapes import SHAPES

NO_AGENT = "/tmp/numa-agent-labels-test-no-agent.sock"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["labels", "--listen", NO_AGENT, *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_nfd_and_json_agree(
    name: str, shape_root: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(shape_root(name))
    code, text, err = run(capsys, "--sysfs-root", root, "--label-salt", "s")
    assert code == 0
    assert text.splitlines()[0] == HEADER
    code, out, err_json = run(capsys, "--sysfs-root", root, "--label-salt", "s", "--json")
    assert code == 0 and err_json == err
    assert json.loads(out) == parse_feature_file(text)
    code, out, _ = run(capsys, "--sysfs-root", root, "--label-salt", "s", "--format", "json")
    assert json.loads(out) == parse_feature_file(text)
    # A missing physical-host label is explained on stderr, and only then.
    assert (PHYSICAL_HOST in json.loads(out)) is (err == "")


def test_why_a_vm_has_no_physical_host(
    shape_root: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "--sysfs-root", str(shape_root("isolated-offline")))
    assert code == 0
    assert parse_feature_file(out)[VIRTUAL] == "true"
    assert err == (
        "numa-agent labels: no numa-agent.io/physical-host label: DMI describes a VM "
        "(QEMU Standard PC (Q35 + ICH9, 2009)), not its host; set physical_host_id\n"
    )
    code, out, err = run(
        capsys,
        "--sysfs-root",
        str(shape_root("isolated-offline")),
        "--physical-host-id",
        "hv-17",
    )
    assert (code, err) == (0, "")
    assert len(parse_feature_file(out)[PHYSICAL_HOST]) == 16


def test_two_vms_on_one_host_share_the_label_and_the_salt_matters(
    tmp_path: Path, shape_root: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    host_file = tmp_path / "host"
    host_file.write_text("hv-17\n")
    values = {}
    for shape, source, salt in [
        ("isolated-offline", "hv-17", "a"),
        ("xeon-2s-2numa", f"file:{host_file}", "a"),  # another node, same host, from a file
        ("xeon-2s-2numa", "hv-17", "b"),
        ("xeon-2s-2numa", "hv-18", "a"),
    ]:
        argv = ["--sysfs-root", str(shape_root(shape)), "--physical-host-id", source]
        code, out, _ = run(capsys, *argv, "--label-salt", salt)
        assert code == 0
        values[shape, source, salt] = parse_feature_file(out)[PHYSICAL_HOST]
    assert (
        values["isolated-offline", "hv-17", "a"]
        == values["xeon-2s-2numa", f"file:{host_file}", "a"]
    )
    assert len(set(values.values())) == 3
    assert all("hv-1" not in value for value in values.values())


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (
            ["--physical-host-id", "file:/nonexistent/host-id"],
            1,
            "physical_host_id: cannot read /nonexistent/host-id",
        ),
        (
            ["--physical-host-id", "file:relative"],
            2,
            "physical_host_id: 'file:relative': file: needs an absolute path",
        ),
        (
            ["--feature-file", "relative/file"],
            2,
            "feature_file: 'relative/file' is not an absolute file path",
        ),
        (
            ["--feature-file", "/etc/x/.hidden"],
            2,
            "Node Feature Discovery ignores files whose name",
        ),
        (["--numa-labels", "{0: {numa-agent.io/x: y}}"], 2, "numa_labels.0.numa-agent.io/x"),
    ],
)
def test_errors_name_the_setting(
    argv: list[str],
    code: int,
    says: str,
    shape_root: Callable[[str], Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    got, out, err = run(capsys, "--sysfs-root", str(shape_root("xeon-2s-2numa")), *argv)
    assert (got, out) == (code, "")
    assert err.startswith("numa-agent labels: ") and says in err


def test_a_broken_tree_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--sysfs-root", str(tmp_path))
    assert (code, out) == (1, "")
    assert str(tmp_path / "devices/system/cpu") in err


def test_noderesourcetopology_without_an_agent(
    shape_root: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(shape_root("cxl-memory-only"))
    code, out, err = run(capsys, "--sysfs-root", root, "--format", "noderesourcetopology")
    assert code == 0
    status = NO_AGENT.replace(".sock", "-status.sock")
    assert err == f"numa-agent labels: no agent answers on {status}; available = allocatable\n"
    obj = yaml.safe_load(out)
    # kubelet names the node after the host name, lowercased.
    assert obj["metadata"] == {"name": socket.gethostname().lower()}
    assert [z["name"] for z in obj["zones"]] == ["node-0", "node-1"]
