"""NIC locality read by the sysfs reader: physical NICs on their node, virtual ones and
-1 nowhere; the state file's fingerprint does not see NICs come and go."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.node.fingerprint import machine_fingerprint
from devtools.fakesysfs import write_sysfs
from topology.render import machine_to_json
from topology.shapes import SHAPES, MachineSpec, MachineSpecError
from topology.sysfs import SysfsError, read_machine
from topology.tree import NetworkInterface

# Two NUMA nodes: eth0 on node 1, eth1 on node 0, eth2 reporting -1, lo and a bridge virtual.
SPEC = MachineSpec(
    numa_per_die=2,
    cores_per_numa=2,
    nics=(("eth0", 1), ("eth1", 0), ("eth2", -1)),
    virtual_nics=("lo", "br0"),
)


def test_nic_locality_physical_virtual_and_unknown(
    spec_root: Callable[[MachineSpec], Path],
) -> None:
    root = spec_root(SPEC)
    # As in the kernel's tree, `device` links to the PCI function, which holds numa_node.
    assert (root / "class/net/eth0/device").is_symlink()
    assert (root / "class/net/eth0/device/numa_node").read_text() == "1\n"
    assert not (root / "class/net/lo/device").exists()
    assert (root / "class/net/eth2/device/numa_node").read_text() == "-1\n"

    machine = read_machine(root)
    assert machine.nics == (NetworkInterface("eth0", 1), NetworkInterface("eth1", 0))
    assert machine.nics_on(0) == ("eth1",)
    assert machine.nics_on(1) == ("eth0",)


def test_a_tree_written_again_over_itself_reads_the_same(tmp_path: Path) -> None:
    first = read_machine(write_sysfs(SPEC, tmp_path / "sys"))
    again = read_machine(write_sysfs(SPEC, tmp_path / "sys"))
    assert again == first and again.nics == first.nics != ()


def test_device_without_numa_node_is_not_local(spec_root: Callable[[MachineSpec], Path]) -> None:
    # A virtio NIC: its `device` is the virtio device, which has no numa_node file.
    root = spec_root(SPEC)
    (root / "class/net/eth0/device/numa_node").unlink()
    assert [nic.name for nic in read_machine(root).nics] == ["eth1"]


def test_no_class_net_directory(spec_root: Callable[[MachineSpec], Path]) -> None:
    root = spec_root(SPEC)
    shutil.rmtree(root / "class")
    assert read_machine(root).nics == ()


def test_unparsable_numa_node_names_the_file(spec_root: Callable[[MachineSpec], Path]) -> None:
    root = spec_root(SPEC)
    numa_file = root / "class/net/eth1/device/numa_node"
    numa_file.write_text("zero\n")
    with pytest.raises(SysfsError) as err:
        read_machine(root)
    assert str(err.value) == f"{numa_file}: expected an integer, found 'zero'"


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_shape_reads_its_nics(name: str, shape_root: Callable[[str], Path]) -> None:
    spec = SHAPES[name]
    machine = read_machine(shape_root(name))
    local = sorted((nic, node) for nic, node in spec.nics if node >= 0)
    assert [(n.name, n.numa_node) for n in machine.nics] == local
    for virtual in spec.virtual_nics:
        assert (shape_root(name) / "class/net" / virtual).is_dir()
        assert virtual not in {n.name for n in machine.nics}


def test_some_shapes_have_local_nics() -> None:
    with_nics = [name for name, spec in SHAPES.items() if any(n >= 0 for _, n in spec.nics)]
    assert len(with_nics) >= 3, with_nics


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_fingerprint_ignores_nics(name: str, shape_root: Callable[[str], Path]) -> None:
    """A NIC appearing (hot-plug, a driver loading) must not invalidate the state file."""
    machine = read_machine(shape_root(name))
    without = dataclasses.replace(machine, nics=())
    assert "nics" not in machine_to_json(machine)
    assert machine_fingerprint(machine) == machine_fingerprint(without)
    added = dataclasses.replace(machine, nics=(NetworkInterface("ethX", 0),))
    assert machine_fingerprint(added) == machine_fingerprint(machine)


@pytest.mark.parametrize(
    ("nics", "virtual", "says"),
    [
        ((("eth/0", 0),), ("lo",), "'eth/0' is not an interface name"),
        ((("a-very-long-name0", 0),), ("lo",), "is not an interface name"),
        ((("eth0", 0),), ("eth0",), "interface(s) eth0 given twice"),
        ((("eth0", 2),), ("lo",), "eth0: NUMA node 2 does not exist (-1 or 0..1)"),
        ((("eth0", -2),), ("lo",), "eth0: NUMA node -2 does not exist"),
    ],
)
def test_spec_nics_are_checked(
    nics: tuple[tuple[str, int], ...], virtual: tuple[str, ...], says: str
) -> None:
    with pytest.raises(MachineSpecError) as err:
        MachineSpec(numa_per_die=2, nics=nics, virtual_nics=virtual)
    assert str(err.value).startswith("nics: ")
    assert says in str(err.value)


def test_spec_nics_from_a_scenario() -> None:
    spec = MachineSpec.from_mapping(
        {"numa_per_die": 2, "nics": {"eth0": 1, "eth1": -1}, "virtual_nics": ["lo", "cni0"]}
    )
    assert spec.nics == (("eth0", 1), ("eth1", -1))
    assert spec.virtual_nics == ("lo", "cni0")


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (["eth0"], "nics: expected a mapping of interface to NUMA node"),
        ({"eth0": "1"}, "nics: eth0: expected a NUMA node number, got '1'"),
        ({"eth0": True}, "nics: eth0: expected a NUMA node number"),
        ({1: 0}, "nics: interface name 1 is not a string"),
    ],
)
def test_spec_nics_from_a_scenario_errors(value: object, says: str) -> None:
    with pytest.raises(MachineSpecError) as err:
        MachineSpec.from_mapping({"nics": value})
    assert says in str(err.value)
