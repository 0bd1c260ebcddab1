"""`numa-agent topology`: the documented JSON shape and the text for a person."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.cli import main
from agent.labels.numa import numa_node_labels
from topology.render import (
    DISPLAY_ONLY,
    format_bytes,
    machine_to_json,
    render_text,
    topology_json,
)
from topology.shapes import GI, SHAPES
from topology.sysfs import read_machine
from topology.tree import Machine

# desktop-1s-4c-ht worked out by hand: 4 cores, interleaved (siblings i and i+4),
# one socket / die / node / L3, 32 GiB.
DESKTOP_JSON = {
    "online": "0-7",
    "offline": "",
    "isolated": "",
    "present": "0-7",
    "sockets": [
        {
            "id": 0,
            "cpus": "0-7",
            "dies": [
                {
                    "id": 0,
                    "cpus": "0-7",
                    "numa_nodes": [
                        {
                            "id": 0,
                            "cpus": "0-7",
                            "memory_bytes": 32 * GI,
                            "l3_groups": ["0-7"],
                            "cores": ["0,4", "1,5", "2,6", "3,7"],
                            # Its NIC reports no node (-1): no net label.
                            "labels": {
                                "numa-agent.io/cpus": "8",
                                "numa-agent.io/die": "0",
                                "numa-agent.io/memory-mib": "32768",
                                "numa-agent.io/numa": "0",
                                "numa-agent.io/socket": "0",
                            },
                        }
                    ],
                }
            ],
        }
    ],
    "memory_only_nodes": [],
    "distances": {"0": {"0": 10}},
    "nics": [],
    "favoured_cpus": "",
    "memory_tiers": [],
}


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_of_desktop_is_exact(
    shape_root: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(
        capsys, "topology", "--sysfs-root", str(shape_root("desktop-1s-4c-ht")), "--json"
    )
    assert (code, err) == (0, "")
    assert json.loads(out) == DESKTOP_JSON


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_json_command_matches_the_tree(
    name: str, shape_root: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "topology", "--sysfs-root", str(shape_root(name)), "--json")
    assert code == 0
    data = json.loads(out)
    machine = read_machine(shape_root(name))
    assert data == topology_json(machine, numa_node_labels(machine))
    # What the state file's fingerprint hashes is the document without labels and NICs.
    topology_only = json.loads(out)
    for key in DISPLAY_ONLY:
        del topology_only[key]
    for socket in topology_only["sockets"]:
        for die in socket["dies"]:
            for node in die["numa_nodes"]:
                assert node.pop("labels")["numa-agent.io/numa"] == str(node["id"])
    assert topology_only == machine_to_json(machine)
    assert data["nics"] == [{"name": n.name, "numa_node": n.numa_node} for n in machine.nics]
    nodes = [n for s in data["sockets"] for d in s["dies"] for n in d["numa_nodes"]]
    assert [n["id"] for n in nodes] == sorted(n.id for n in machine.iter_numa_nodes())
    for node in nodes:
        firsts = [int(core.split(",")[0].split("-")[0]) for core in node["cores"]]
        assert firsts == sorted(firsts)
    assert sum(len(n["cores"]) for n in nodes) == len(list(machine.iter_cores()))


def test_json_of_xeon_matches_the_issue_example(shape_root: Callable[[str], Path]) -> None:
    data = machine_to_json(read_machine(shape_root("xeon-2s-2numa")))
    assert data["online"] == "0-79"
    socket0 = data["sockets"][0]
    assert (socket0["id"], socket0["cpus"]) == (0, "0-19,40-59")
    node0 = socket0["dies"][0]["numa_nodes"][0]
    assert (node0["id"], node0["cpus"], node0["l3_groups"]) == (0, "0-9,40-49", ["0-9,40-49"])
    assert node0["cores"][:2] == ["0,40", "1,41"]
    assert data["distances"]["0"] == {"0": 10, "1": 11, "2": 21, "3": 21}


def test_json_memory_only_and_hybrid(shape_machine: Callable[[str], Machine]) -> None:
    cxl = machine_to_json(shape_machine("cxl-memory-only"))
    assert cxl["memory_only_nodes"] == [
        {"id": 2, "memory_bytes": 256 * GI, "closest_cpu_node": 0},
        {"id": 3, "memory_bytes": 256 * GI, "closest_cpu_node": 1},
    ]
    assert cxl["distances"]["2"] == {"0": 14, "1": 25, "2": 10, "3": 39}
    hybrid = machine_to_json(shape_machine("hybrid-desktop"))
    node = hybrid["sockets"][0]["dies"][0]["numa_nodes"][0]
    assert node["cpu_classes"] == {"efficiency": "16-23", "performance": "0-15"}


def test_text_for_a_person(shape_machine: Callable[[str], Machine]) -> None:
    text = render_text(shape_machine("xeon-2s-2numa"))
    lines = text.splitlines()
    assert lines[0] == "machine: 80 CPUs online (0-79), 2 socket(s), 4 NUMA node(s)"
    assert "socket 1  cpus 20-39,60-79" in lines
    assert (
        "    node 2  cpus 20-29,60-69  memory 96.0 GiB  10 cores x 2 threads  L3 20-29,60-69"
        in lines
    )
    matrix = lines[lines.index("distances:") + 1 :]
    assert matrix == [
        "  node  0  1  2  3",
        "     0 10 11 21 21",
        "     1 11 10 21 21",
        "     2 21 21 10 11",
        "     3 21 21 11 10",
    ]


def test_text_shows_offline_isolated_memory_only_and_classes(
    shape_machine: Callable[[str], Machine],
) -> None:
    assert "offline: 13-15  isolated: 2-5" in render_text(shape_machine("isolated-offline"))
    assert "memory-only node 3  memory 256.0 GiB  closest CPU node 1" in render_text(
        shape_machine("cxl-memory-only")
    )
    assert "(8 efficiency, 8 performance)" in render_text(shape_machine("hybrid-desktop"))


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (96 * GI, "96.0 GiB"),
        (3 * 1024**5, "3.0 PiB"),
    ],
)
def test_format_bytes(size: int, text: str) -> None:
    assert format_bytes(size) == text


def test_text_command(
    shape_root: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = shape_root("epyc-2s-nps4")
    code, out, err = _run(capsys, "topology", "--sysfs-root", str(root))
    assert (code, err) == (0, "")
    machine = read_machine(root)
    assert out == render_text(machine, numa_node_labels(machine))
    assert out.count("\n    node ") == 8
    assert out.count("\n      labels numa-agent.io/cpus=32 ") == 8
    # NICs on nodes 1 and 5 (the shape's), in the node's labels and in their own line.
    assert "numa-agent.io/net.enp65s0f0np0=true" in out.split("\n    node 1 ")[1].split("\n")[1]
    assert (
        "network interfaces: enp193s0f0np0 (node 5), enp65s0f0np0 (node 1), "
        "enp65s0f1np1 (node 1)\n" in out
    )


def test_broken_tree_exits_1_naming_the_file(
    tmp_path: Path, shape_root: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "sys"
    shutil.copytree(shape_root("desktop-1s-4c-ht"), root)
    distance = root / "devices/system/node/node0/distance"
    distance.write_text("10 20\n")
    code, out, err = _run(capsys, "topology", "--sysfs-root", str(root), "--json")
    assert (code, out) == (1, "")
    assert err == f"numa-agent topology: {distance}: 2 distances for 1 nodes (0)\n"


def test_missing_root_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "topology", "--sysfs-root", str(tmp_path / "nothing"))
    assert code == 1
    assert str(tmp_path / "nothing" / "devices/system/cpu") in err


def test_operator_labels_from_the_config_are_shown(
    tmp_path: Path, shape_root: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text('numa_labels: {3: {example.com/storage: nvme}, "1": {example.com/tier: b}}\n')
    root = str(shape_root("xeon-2s-2numa"))
    code, out, err = _run(capsys, "topology", "--sysfs-root", root, "--config", str(config))
    assert (code, err) == (0, "")
    node3 = out.split("\n    node 3 ")[1].split("\n")[1]
    assert node3.startswith("      labels example.com/storage=nvme numa-agent.io/cpus=20 ")
    code, out, err = _run(
        capsys, "topology", "--sysfs-root", root, "--config", str(config), "--json"
    )
    nodes = {
        n["id"]: n["labels"]
        for s in json.loads(out)["sockets"]
        for d in s["dies"]
        for n in d["numa_nodes"]
    }
    assert nodes[3]["example.com/storage"] == "nvme"
    assert nodes[1]["example.com/tier"] == "b"
    assert "example.com/storage" not in nodes[1]


def test_operator_labels_for_another_machine_warn(
    tmp_path: Path, shape_root: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("numa_labels: {7: {example.com/storage: nvme}}\n")
    root = str(shape_root("desktop-1s-4c-ht"))
    code, out, err = _run(capsys, "topology", "--sysfs-root", root, "--config", str(config))
    assert code == 0
    assert "example.com/storage" not in out
    assert err == (
        "numa-agent topology: warning: numa_labels.7: NUMA node 7 does not exist on this "
        "machine; labels go on NUMA nodes with CPUs: 0\n"
    )


def test_invalid_config_exits_2(
    tmp_path: Path, shape_root: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("numa_labels: {0: {numa-agent.io/numa: '9'}}\n")
    root = str(shape_root("desktop-1s-4c-ht"))
    code, out, err = _run(capsys, "topology", "--sysfs-root", root, "--config", str(config))
    assert (code, out) == (2, "")
    assert "numa_labels.0.numa-agent.io/numa: the numa-agent.io/ prefix" in err
