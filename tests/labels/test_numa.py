"""NUMA-node labels over every named shape: each value checked against the tree it
comes from, every label valid for Kubernetes, operator labels merged."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent.kube.names import label_key_problem, label_value_problem
from agent.labels.numa import CPUS, DIE, MEMORY_MIB, NET_PREFIX, NUMA, SOCKET, numa_node_labels
from topology.shapes import SHAPES
from topology.tree import Machine, NetworkInterface

SHAPE_NAMES = sorted(SHAPES)


@pytest.mark.parametrize("name", SHAPE_NAMES)
def test_every_numa_node_with_cpus_has_its_labels(
    name: str, shape_machine: Callable[[str], Machine]
) -> None:
    machine = shape_machine(name)
    labels = numa_node_labels(machine, {})
    assert sorted(labels) == sorted(node.id for node in machine.iter_numa_nodes())
    assert not set(labels) & {m.id for m in machine.memory_only_nodes}
    dies_seen: dict[tuple[int, int], str] = {}
    for socket in machine.sockets:
        for die in socket.dies:
            for node in die.numa_nodes:
                own = labels[node.id]
                assert own[NUMA] == str(node.id)
                assert own[SOCKET] == str(socket.id)
                assert own[CPUS] == str(len(node.cpus))
                assert int(own[MEMORY_MIB]) * 2**20 <= node.memory_bytes
                assert node.memory_bytes - int(own[MEMORY_MIB]) * 2**20 < 2**20
                nets = {k.removeprefix(NET_PREFIX) for k in own if k.startswith(NET_PREFIX)}
                assert nets == {n.name for n in machine.nics if n.numa_node == node.id}
                assert all(own[NET_PREFIX + n] == "true" for n in nets)
                # Every node of one die gets the same value, no two dies share one.
                dies_seen.setdefault((socket.id, die.id), own[DIE])
                assert own[DIE] == dies_seen[socket.id, die.id]
    die_values = list(dies_seen.values())
    assert sorted(die_values, key=int) == [str(i) for i in range(len(list(machine.iter_dies())))]


@pytest.mark.parametrize("name", SHAPE_NAMES)
def test_every_label_is_valid_for_kubernetes(
    name: str, shape_machine: Callable[[str], Machine]
) -> None:
    for node, labels in numa_node_labels(shape_machine(name), {}).items():
        for key, value in labels.items():
            assert label_key_problem(key) is None, (node, key)
            assert label_value_problem(value) is None, (node, key, value)
            assert key.startswith("numa-agent.io/")


def test_die_index_is_unique_across_sockets(shape_machine: Callable[[str], Machine]) -> None:
    # dies-2-per-socket: sysfs die ids are 0 and 1 in both sockets; the label is not.
    machine = shape_machine("dies-2-per-socket")
    assert [d.id for d in machine.iter_dies()] == [0, 1, 0, 1]
    labels = numa_node_labels(machine)
    assert [labels[n.id][DIE] for n in machine.iter_numa_nodes()] == ["0", "1", "2", "3"]


def test_nics_on_the_xeon(shape_machine: Callable[[str], Machine]) -> None:
    labels = numa_node_labels(shape_machine("xeon-2s-2numa"))
    nets = {
        node: sorted(k for k in own if k.startswith(NET_PREFIX)) for node, own in labels.items()
    }
    assert nets == {
        0: [NET_PREFIX + "eno1", NET_PREFIX + "ens1f0", NET_PREFIX + "ens1f1"],
        1: [],
        2: [NET_PREFIX + "ens5f0"],
        3: [],
    }


def test_operator_labels_join_and_cannot_override(
    shape_machine: Callable[[str], Machine],
) -> None:
    machine = shape_machine("xeon-2s-2numa")
    operator = {
        3: {"example.com/storage": "nvme", NUMA: "9"},  # a forged agent label loses
        1: {"example.com/tier": "gold"},
        7: {"example.com/ghost": "x"},  # no such node: ignored here (checked by the config)
    }
    labels = numa_node_labels(machine, operator)
    assert labels[3]["example.com/storage"] == "nvme"
    assert labels[3][NUMA] == "3"
    assert labels[1]["example.com/tier"] == "gold"
    assert "example.com/storage" not in labels[1]
    assert 7 not in labels
    assert list(labels[3]) == sorted(labels[3])


def test_interface_names_that_cannot_be_label_keys_are_skipped(
    shape_machine: Callable[[str], Machine],
) -> None:
    import dataclasses

    machine = dataclasses.replace(
        shape_machine("desktop-1s-4c-ht"),
        nics=(NetworkInterface("eth@0", 0), NetworkInterface("eth0", 0)),
    )
    own = numa_node_labels(machine)[0]
    assert NET_PREFIX + "eth0" in own
    assert not any("@" in key for key in own)
