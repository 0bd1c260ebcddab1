"""Node labels over every named shape: counts from the shape's description, virtual and
physical-host from its DMI, and every label valid for Kubernetes."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.kube.names import label_key_problem, label_value_problem
from agent.labels import node as n
from agent.labels.nfd import feature_file_text, parse_feature_file
from agent.labels.sources import current_node_labels
from topology.cpuset import CPUSet
from topology.dmi import read_dmi
from topology.shapes import SHAPES, MachineSpec, cpu_layout
from topology.tree import Machine

# DMI of each shape: the virtual label (None: absent) and whether physical-host is there.
HOST: dict[str, tuple[str | None, bool]] = {
    "desktop-1s-4c-ht": (None, False),  # no DMI at all
    "xeon-2s-2numa": ("false", True),
    "epyc-2s-nps4": ("false", True),
    "server-4s": ("false", True),
    "dies-2-per-socket": ("false", True),
    "isolated-offline": ("true", False),  # a KVM guest: DMI names the VM, not its host
    "cxl-memory-only": ("false", True),
    "hybrid-desktop": ("false", False),  # placeholder product_uuid
    "desktop-favoured": (None, False),
    "arm-big-little": (None, False),
}


def expected_counts(spec: MachineSpec) -> dict[str, str]:
    """What the labels must say, from the description the fake tree was written from."""
    online = CPUSet.range(0, spec.cpu_count - 1) - spec.offline
    cores = [c for c in cpu_layout(spec) if CPUSet.of(c.cpus) & online]
    out = {
        n.SOCKETS: str(spec.sockets),
        n.NUMA_NODES: str(spec.cpu_node_count),
        n.MEMORY_ONLY_NODES: str(spec.memory_only_nodes),
        n.CORES: str(len(cores)),
        n.CPUS: str(len(online)),
        n.SMT: "true" if any(len(CPUSet.of(c.cpus) & online) > 1 for c in cores) else "false",
        n.L3_GROUPS: str(spec.cpu_node_count * max(spec.l3_per_numa, 1)),
        n.ISOLATED_CPUS: str(len(spec.isolated & online)),
    }
    # Kinds of core where the kernel tells them apart (cpu_core/cpu_atom, capacity).
    if spec.efficiency_cores_per_numa and spec.hybrid_signal != "cpufreq":
        out[n.PERFORMANCE_CORES] = str(sum(not c.efficiency for c in cores))
        out[n.EFFICIENCY_CORES] = str(sum(c.efficiency for c in cores))
    if spec.favoured_cores_per_numa:
        out[n.FAVOURED_CORES] = str(sum(c.favoured for c in cores))
    return out


def labels_of(name: str, root: Path, machine: Machine, **settings: str) -> dict[str, str]:
    computed = current_node_labels(
        machine,
        read_dmi(root),
        physical_host_id=settings.get("physical_host_id", ""),
        label_salt=settings.get("label_salt", "s"),
    )
    return computed.labels


def test_every_shape_has_an_expectation() -> None:
    assert sorted(HOST) == sorted(SHAPES)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_node_labels_of_every_shape(
    name: str, shape_root: Callable[[str], Path], shape_machine: Callable[[str], Machine]
) -> None:
    labels = labels_of(name, shape_root(name), shape_machine(name))
    virtual, has_host = HOST[name]
    expected = expected_counts(SHAPES[name])
    assert {k: labels[k] for k in expected} == expected
    assert labels.get(n.VIRTUAL) == virtual
    assert (n.PHYSICAL_HOST in labels) is has_host
    extra = set(labels) - set(expected) - {n.VIRTUAL, n.PHYSICAL_HOST}
    assert not extra, extra
    assert list(labels) == sorted(labels)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_label_is_valid_for_kubernetes(
    name: str, shape_root: Callable[[str], Path], shape_machine: Callable[[str], Machine]
) -> None:
    # With a provider's id too, so physical-host is checked on every shape.
    for settings in ({}, {"physical_host_id": "rack7/host-0042", "label_salt": "x" * 100}):
        labels = labels_of(name, shape_root(name), shape_machine(name), **settings)
        for key, value in labels.items():
            assert key.startswith("numa-agent.io/")
            assert label_key_problem(key) is None, key
            assert label_value_problem(value) is None, (key, value)
            assert len(value) <= 63
        if settings:
            assert re.fullmatch(r"[0-9a-f]{16}", labels[n.PHYSICAL_HOST])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_the_feature_file_is_the_labels(
    name: str, shape_root: Callable[[str], Path], shape_machine: Callable[[str], Machine]
) -> None:
    labels = labels_of(name, shape_root(name), shape_machine(name))
    text = feature_file_text(labels)
    assert parse_feature_file(text) == labels
    body = [line for line in text.splitlines() if not line.startswith("#")]
    assert body == sorted(body) and len(body) == len(labels)
    assert len(text.encode()) < 64 * 1024  # NFD ignores bigger files
