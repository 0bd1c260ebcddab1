"""The compact machine description: CPU numbering, scenario parsing, generated distances."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devtools.fakesysfs import write_shape
from topology.cpuset import CPUSet
from topology.shapes import (
    GI,
    MachineSpec,
    MachineSpecError,
    cpu_layout,
    distance_matrix,
    parse_quantity,
)


@pytest.mark.parametrize(
    ("spec", "cores"),
    [
        # 2 sockets x 2 cores x 2 threads: first threads 0-3 socket by socket, then 4-7.
        (
            MachineSpec(sockets=2, cores_per_numa=2, numbering="interleaved"),
            [(0, 4), (1, 5), (2, 6), (3, 7)],
        ),
        (
            MachineSpec(sockets=2, cores_per_numa=2, numbering="adjacent"),
            [(0, 1), (2, 3), (4, 5), (6, 7)],
        ),
        # 4-way SMT, interleaved: core k has k, k+2, k+4, k+6.
        (
            MachineSpec(cores_per_numa=2, threads_per_core=4),
            [(0, 2, 4, 6), (1, 3, 5, 7)],
        ),
        (MachineSpec(cores_per_numa=3, threads_per_core=1), [(0,), (1,), (2,)]),
        # Hybrid: 2 HT performance cores then 2 single-thread efficiency cores.
        (
            MachineSpec(cores_per_numa=4, efficiency_cores_per_numa=2, numbering="adjacent"),
            [(0, 1), (2, 3), (4,), (5,)],
        ),
        (
            MachineSpec(cores_per_numa=4, efficiency_cores_per_numa=2, numbering="interleaved"),
            [(0, 4), (1, 5), (2,), (3,)],
        ),
    ],
)
def test_cpu_numbering(spec: MachineSpec, cores: list[tuple[int, ...]]) -> None:
    assert [core.cpus for core in cpu_layout(spec)] == cores


def test_interleaved_siblings_are_i_and_i_plus_cores_total() -> None:
    spec = MachineSpec(sockets=2, numa_per_die=2, cores_per_numa=10)
    for core in cpu_layout(spec):
        first, second = core.cpus
        assert second == first + spec.core_count == first + 40


def test_layout_places_cores_in_socket_die_node_order() -> None:
    spec = MachineSpec(sockets=2, dies_per_socket=2, numa_per_die=2, cores_per_numa=1)
    places = [(c.socket, c.die, c.numa) for c in cpu_layout(spec)]
    assert places == [
        (0, 0, 0),
        (0, 0, 1),
        (0, 1, 2),
        (0, 1, 3),
        (1, 0, 4),
        (1, 0, 5),
        (1, 1, 6),
        (1, 1, 7),
    ]


def test_generated_distances() -> None:
    spec = MachineSpec(
        sockets=2,
        dies_per_socket=2,
        numa_per_die=2,
        cores_per_numa=1,
        memory_only_nodes=1,
        distance_same_die=11,
        distance_same_socket=12,
        distance_remote=21,
        memory_only_distance=14,
    )
    m = distance_matrix(spec)
    assert m[0][:8] == (10, 11, 12, 12, 21, 21, 21, 21)
    assert m[5][:8] == (21, 21, 21, 21, 11, 10, 12, 12)
    # The memory-only node 8 sits by node 0: 14 there, 14 + (d(0, x) - 10) elsewhere.
    assert m[8] == (14, 15, 16, 16, 25, 25, 25, 25, 10)
    assert all(m[a][b] == m[b][a] for a in range(9) for b in range(9))


@pytest.mark.parametrize(
    ("value", "size"),
    [
        (123, 123),
        ("96Gi", 96 * GI),
        ("512Mi", 512 * 1024**2),
        ("1G", 10**9),
        ("1.5Gi", 3 * GI // 2),
        ("4096", 4096),
        ("2Ti", 2 * 1024**4),
    ],
)
def test_parse_quantity(value: object, size: int) -> None:
    assert parse_quantity(value) == size


@pytest.mark.parametrize("value", ["96GB", "lots", "-1Gi", "1.5", 1.5, True, None, -3])
def test_parse_quantity_rejects(value: object) -> None:
    with pytest.raises(MachineSpecError, match="memory_per_numa"):
        parse_quantity(value, "memory_per_numa")


def test_from_mapping_compact_scenario_form() -> None:
    spec = MachineSpec.from_mapping(
        {
            "sockets": 2,
            "dies_per_socket": 1,
            "numa_per_die": 2,
            "cores_per_numa": 10,
            "threads_per_core": 2,
            "numbering": "interleaved",
            "memory_per_numa": "96Gi",
            "distances": [[10, 11, 21, 21], [11, 10, 21, 21], [21, 21, 10, 11], [21, 21, 11, 10]],
            "isolated": "0-1",
            "offline": [79],
        }
    )
    assert spec.cpu_count == 80
    assert spec.memory_per_numa == 96 * GI
    assert spec.distances is not None and spec.distances[0] == (10, 11, 21, 21)
    assert spec.isolated == CPUSet.parse("0-1")
    assert spec.offline == CPUSet.of([79])


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"socket": 2}, "socket"),
        ({"sockets": "two"}, "sockets"),
        ({"sockets": 0}, "sockets"),
        ({"threads_per_core": True}, "threads_per_core"),
        ({"numbering": "zigzag"}, "numbering"),
        ({"memory_per_numa": "96 gigs"}, "memory_per_numa"),
        ({"distances": [[10, 11], [11]]}, "distances"),
        ({"distances": [[10]], "sockets": 2}, "distances"),
        ({"distances": "near"}, "distances"),
        ({"isolated": "3-1"}, "isolated"),
        ({"offline": "100"}, "offline"),
        ({"offline": "0-7"}, "offline"),
        ({"cores_per_numa": 4, "efficiency_cores_per_numa": 4}, "efficiency_cores_per_numa"),
        ({"l3_per_numa": 9}, "l3_per_numa"),
        ({"write_node_dir": "no"}, "write_node_dir"),
    ],
)
def test_from_mapping_errors_name_the_key(data: dict[str, Any], key: str) -> None:
    with pytest.raises(MachineSpecError) as info:
        MachineSpec.from_mapping(data)
    assert str(info.value).startswith(f"{key}:")


def test_write_shape_unknown_name_lists_known_shapes(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="xeon-2s-2numa"):
        write_shape("no-such-machine", tmp_path)


def test_writer_omits_topology_of_offline_cpus(tmp_path: Path) -> None:
    root = write_shape("isolated-offline", tmp_path / "sys")
    cpu = root / "devices/system/cpu"
    assert (cpu / "offline").read_text() == "13-15\n"
    assert (cpu / "cpu13" / "online").read_text() == "0\n"
    assert not (cpu / "cpu13" / "topology").exists()
    assert (cpu / "cpu12" / "topology" / "core_cpus_list").read_text() == "12\n"
    assert (root / "devices/system/node/node1/cpulist").read_text() == "8-12\n"
