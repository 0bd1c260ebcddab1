"""The real /sys of the machine the tests run on, checked against the files read directly."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agent.cli import main
from topology.cpuset import CPUSet
from topology.sysfs import read_machine

SYS = Path("/sys/devices/system")


def _cpus(path: Path) -> CPUSet:
    return CPUSet.parse(path.read_text())


def _node_memtotal(node: int) -> int:
    text = (SYS / "node" / f"node{node}" / "meminfo").read_text()
    match = re.search(r"MemTotal:\s+(\d+) kB", text)
    assert match is not None
    return int(match.group(1)) * 1024


def test_real_machine_matches_sysfs() -> None:
    machine = read_machine("/sys", cpu_info=False)
    online = _cpus(SYS / "cpu" / "online")
    assert machine.online == online
    assert machine.cpus == online
    assert machine.offline == _cpus(SYS / "cpu" / "offline")
    assert machine.isolated == _cpus(SYS / "cpu" / "isolated")
    assert machine.present == _cpus(SYS / "cpu" / "present")
    packages = {int((SYS / f"cpu/cpu{c}/topology/physical_package_id").read_text()) for c in online}
    assert len(machine.sockets) == len(packages)
    for core in machine.iter_cores():
        for cpu in core.cpus:
            assert core.cpus == _cpus(SYS / f"cpu/cpu{cpu}/topology/thread_siblings_list") & online
    node_dirs = sorted(int(p.name[4:]) for p in (SYS / "node").glob("node[0-9]*"))
    with_cpus = [n for n in node_dirs if _cpus(SYS / f"node/node{n}/cpulist") & online]
    assert [n.id for n in machine.iter_numa_nodes()] == with_cpus
    for node in machine.iter_numa_nodes():
        assert node.cpus == _cpus(SYS / f"node/node{node.id}/cpulist") & online
        row = [int(d) for d in (SYS / f"node/node{node.id}/distance").read_text().split()]
        assert [node.distances[n] for n in node_dirs] == row


def test_real_machine_memory() -> None:
    # Memory can be hot-plugged (this VM does it), so bracket the reader's value.
    node_ids = [int(p.name[4:]) for p in (SYS / "node").glob("node[0-9]*")]
    before = {n: _node_memtotal(n) for n in node_ids}
    machine = read_machine("/sys", cpu_info=False)
    after = {n: _node_memtotal(n) for n in node_ids}
    for node in machine.iter_numa_nodes():
        low, high = sorted((before[node.id], after[node.id]))
        assert node.memory_bytes > 0
        assert low <= node.memory_bytes <= high


def test_real_topology_command_prints_this_machine(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topology", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["online"] == str(_cpus(SYS / "cpu" / "online"))
    nodes = [n for s in data["sockets"] for d in s["dies"] for n in d["numa_nodes"]]
    assert CPUSet().union(*(CPUSet.parse(n["cpus"]) for n in nodes)) == _cpus(
        SYS / "cpu" / "online"
    )
    # The real /sys (and only it) gets the CPU model from py-cpuinfo.
    cpuinfo = Path("/proc/cpuinfo").read_text()
    if re.search(r"^model name\s*:\s*\S", cpuinfo, re.M):
        assert data["cpu_model"]
