"""Random machine descriptions survive write_sysfs + read_machine, and building them
directly (topology.shapes.build_machine) gives the same Machine."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devtools.fakesysfs import write_shape, write_sysfs
from topology.cpuset import CPUSet
from topology.shapes import SHAPES, MachineSpec, build_machine, cpu_layout, shape_machine
from topology.sysfs import read_machine

from .conftest import fast_tmpdir


@st.composite
def specs(draw: st.DrawFn) -> MachineSpec:
    cores = draw(st.integers(1, 3))
    spec = MachineSpec(
        sockets=draw(st.integers(1, 2)),
        dies_per_socket=draw(st.integers(1, 2)),
        numa_per_die=draw(st.integers(1, 2)),
        cores_per_numa=cores,
        threads_per_core=draw(st.integers(1, 2)),
        numbering=draw(st.sampled_from(["interleaved", "adjacent"])),
        efficiency_cores_per_numa=draw(st.integers(0, cores - 1)),
        l3_per_numa=draw(st.integers(0, cores)),
        write_die_id=draw(st.booleans()),
    )
    everything = list(range(spec.cpu_count))
    offline = draw(st.sets(st.sampled_from(everything), max_size=len(everything) - 1))
    isolated = draw(st.sets(st.sampled_from(everything), max_size=len(everything)))
    return MachineSpec(
        **{
            **{f: getattr(spec, f) for f in spec.__dataclass_fields__},
            "offline": CPUSet.of(offline),
            "isolated": CPUSet.of(isolated),
        }
    )


@settings(max_examples=30, deadline=None)
@given(specs())
def test_random_machines_round_trip(spec: MachineSpec) -> None:
    with fast_tmpdir() as tmp:
        machine = read_machine(write_sysfs(spec, tmp / "sys"))
    online = CPUSet.range(0, spec.cpu_count - 1) - spec.offline
    layout = cpu_layout(spec)

    assert machine.online == online
    assert machine.cpus == online
    assert machine.offline == spec.offline
    assert machine.isolated == spec.isolated

    # Siblings: every core's online threads, exactly.
    want_cores = {CPUSet.of(c.cpus) & online for c in layout} - {CPUSet()}
    assert {core.cpus for core in machine.iter_cores()} == want_cores

    # Node memberships; nodes whose CPUs are all offline are memory-only now.
    want_nodes: dict[int, CPUSet] = {}
    for core in layout:
        want_nodes[core.numa] = want_nodes.get(core.numa, CPUSet()) | (
            CPUSet.of(core.cpus) & online
        )
    assert {n.id: n.cpus for n in machine.iter_numa_nodes()} == {
        n: cpus for n, cpus in want_nodes.items() if cpus
    }
    assert {m.id for m in machine.memory_only_nodes} == {
        n for n, cpus in want_nodes.items() if not cpus
    }

    # Sockets and dies that still have an online CPU; without die_id, one die each.
    sockets = {c.socket for c in layout if CPUSet.of(c.cpus) & online}
    dies = {(c.socket, c.die) for c in layout if CPUSet.of(c.cpus) & online}
    assert sorted(s.id for s in machine.sockets) == sorted(sockets)
    want_dies = len(dies) if spec.write_die_id else len(sockets)
    assert len(list(machine.iter_dies())) == want_dies

    # Hybrid classes exactly on hybrid machines.
    classes = {core.cpu_class for core in machine.iter_cores()}
    efficiency = {c for c in layout if c.efficiency and CPUSet.of(c.cpus) & online}
    performance = {c for c in layout if not c.efficiency and CPUSet.of(c.cpus) & online}
    if efficiency and performance:
        assert classes == {"performance", "efficiency"}
    else:
        assert classes == {None}


@settings(max_examples=30, deadline=None)
@given(specs(), st.sampled_from(["capacity", "cpufreq"]), st.integers(0, 2), st.booleans())
def test_a_description_builds_the_machine_its_written_tree_reads_as(
    spec: MachineSpec, signal: str, memory_only: int, node_dir: bool
) -> None:
    # build_machine (no files) and write_sysfs + read_machine must agree on everything.
    fields = {f: getattr(spec, f) for f in spec.__dataclass_fields__}
    fields.update(
        hybrid_signal=signal,
        memory_only_nodes=memory_only if node_dir else 0,
        write_node_dir=node_dir,
        nics=(("eth0", 0), ("eth1", -1)),
    )
    spec = MachineSpec(**fields)
    with fast_tmpdir() as tmp:
        read = read_machine(write_sysfs(spec, tmp / "sys"))
    assert build_machine(spec) == read


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_named_shape_builds_what_its_written_tree_reads_as(name: str) -> None:
    with fast_tmpdir() as tmp:
        read = read_machine(write_shape(name, tmp / "sys"))
    built = shape_machine(name)
    assert built == read
    assert built.online  # not two empty machines
