"""Policy.capacity(): per-pool use and free capacity, read without changing anything."""

from __future__ import annotations

from pathlib import Path

from agent.policy.policy import Policy, PoolCapacity
from agent.workload import QoSClass
from tests.policy.helpers import policy, request, spec_machine
from topology.shapes import MachineSpec

# One socket, two NUMA nodes of two 2-thread cores: pools machine, numa0, numa1.
SPEC = MachineSpec(sockets=1, numa_per_die=2, cores_per_numa=2, threads_per_core=2)


def _by_pool(p: Policy) -> dict[str, PoolCapacity]:
    return {c.pool: c for c in p.capacity()}


def test_empty_machine_is_all_free(tmp_path: Path) -> None:
    machine = spec_machine(SPEC, tmp_path, "cap-empty")
    caps = _by_pool(policy(machine))
    assert list(caps) == ["machine", "numa0", "numa1"]
    for node in machine.iter_numa_nodes():
        cap = caps[f"numa{node.id}"]
        assert cap.cpus == node.cpus and cap.shared == node.cpus
        assert (cap.exclusive_free, cap.shared_milli_used, cap.shared_milli_free) == (4, 0, 4000)
        assert not cap.exclusive
    assert caps["machine"].shared_milli_free == 8000


def test_reserved_cpus_are_neither_shared_nor_exclusive(tmp_path: Path) -> None:
    machine = spec_machine(SPEC, tmp_path, "cap-reserved")
    first = next(iter(machine.iter_numa_nodes()))
    reserved = first.cpus.first()
    caps = _by_pool(policy(machine, reserved_cpus=str(reserved)))
    home = caps[f"numa{first.id}"]
    assert reserved not in home.shared.ids() and len(home.shared) == 3
    assert home.exclusive_free == 3 and caps["machine"].exclusive_free == 7


def test_placements_are_counted_where_they_land(tmp_path: Path) -> None:
    machine = spec_machine(SPEC, tmp_path, "cap-placed")
    p = policy(machine)
    excl = p.place(request("db", 2000))
    assert excl.exclusive
    n = excl.pool  # the node holding its 2 CPUs
    web = p.place(request("web", 1500, qos=QoSClass.BURSTABLE, limit=0))
    m = web.pool
    # The shared container goes to the node with more shared room (4 CPUs vs 2 left).
    assert {n, m} == {"numa0", "numa1"}
    before = dict(p.records())
    caps = _by_pool(p)
    assert dict(p.records()) == before  # reading changed nothing

    assert caps["machine"].exclusive == excl.cpus and caps[n].exclusive == excl.cpus
    assert not caps[m].exclusive
    assert (caps["machine"].exclusive_free, caps[n].exclusive_free, caps[m].exclusive_free) == (
        6,
        2,
        4,
    )
    assert caps[n].shared == caps[n].cpus - excl.cpus and len(caps["machine"].shared) == 6
    # 1500m used in numa M and the machine; free is bounded by the tightest ancestor.
    assert (caps[m].shared_milli_used, caps[n].shared_milli_used) == (1500, 0)
    assert caps["machine"].shared_milli_used == 1500
    assert caps[m].shared_milli_free == 4000 - 1500
    assert caps[n].shared_milli_free == 2000  # min(2 CPUs here, 6000-1500 in the machine)
    assert caps["machine"].shared_milli_free == 6000 - 1500

    p.release("db")
    p.release("web")
    assert _by_pool(p) == _by_pool(policy(machine))
