"""Every shipped example runs, and its result shows the behaviour it is there to show.

Expectations are derived from the Machine (which socket, NUMA node and core
each CPU belongs to), never copied from the program's output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from agent.simulate.driver import RunningContainer, SimulationResult, run_scenario
from agent.simulate.machine import load_machine
from agent.simulate.scenario import load_scenario
from topology.cpuset import CPUSet
from topology.tree import Machine

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def simulate(name: str, events: int | None = None) -> SimulationResult:
    """Run examples/<name>.yaml, optionally only its first `events` events."""
    scenario = load_scenario(EXAMPLES / f"{name}.yaml")
    if events is not None:
        scenario = replace(scenario, events=scenario.events[:events])
    return run_scenario(scenario, load_machine(scenario.topology))


def cpus(c: RunningContainer) -> CPUSet:
    return CPUSet.parse(c.cpuset_cpus)


def get(result: SimulationResult, pod: str, name: str = "main") -> RunningContainer:
    found = [c for c in result.containers if c.pod == pod and c.name == name]
    assert len(found) == 1, f"{pod}/{name} not running: {result.containers}"
    return found[0]


def nodes_of(machine: Machine, cpuset: CPUSet) -> set[int]:
    return {n.id for n in machine.iter_numa_nodes() if not n.cpus.isdisjoint(cpuset)}


def sockets_of(machine: Machine, cpuset: CPUSet) -> set[int]:
    return {s.id for s in machine.sockets if not s.cpus.isdisjoint(cpuset)}


def cores_touched(machine: Machine, cpuset: CPUSet) -> list[CPUSet]:
    return [core.cpus for core in machine.iter_cores() if not core.cpus.isdisjoint(cpuset)]


def check_exclusive_whole_cores(r: SimulationResult) -> None:
    m = r.machine
    db, worker, web = get(r, "db"), get(r, "worker"), get(r, "web")
    assert db.exclusive and worker.exclusive and not web.exclusive
    # An even request: every core it touches is wholly its own.
    assert len(cpus(db)) == 4
    assert all(core.is_subset(cpus(db)) for core in cores_touched(m, cpus(db)))
    assert len(cores_touched(m, cpus(db))) == 2
    # An odd request: one whole core plus a single thread of another.
    touched = cores_touched(m, cpus(worker))
    assert len(cpus(worker)) == 3 and len(touched) == 2
    assert sorted(len(core & cpus(worker)) for core in touched) == [1, 2]
    for c in (db, worker):
        assert len(nodes_of(m, cpus(c))) == 1
        assert CPUSet.parse(c.cpuset_mems) == CPUSet.of(nodes_of(m, cpus(c)))
    assert cpus(web).isdisjoint(cpus(db) | cpus(worker))


def check_numa_packing(r: SimulationResult) -> None:
    m = r.machine
    small, big = get(r, "small"), get(r, "big")
    node_size = max(len(n.cpus) for n in m.iter_numa_nodes())
    assert len(cpus(small)) == 3 and len(nodes_of(m, cpus(small))) == 1
    # Larger than any node: the fewest nodes (two), both on one socket.
    assert len(cpus(big)) == 6 > node_size
    assert len(nodes_of(m, cpus(big))) == 2
    assert len(sockets_of(m, cpus(big))) == 1
    assert CPUSet.parse(big.cpuset_mems) == CPUSet.of(nodes_of(m, cpus(big)))


def check_shared_pool(r: SimulationResult) -> None:
    m = r.machine
    small = get(r, "small")
    assert small.exclusive and len(cpus(small)) == 2
    # Regrown: everything but small's CPUs, including those big had taken.
    for pod in ("frontend", "batch"):
        assert cpus(get(r, pod)) == m.cpus - cpus(small)
    # Half-way (after big was created) the shared set had shrunk to 8 - 4 CPUs.
    mid = simulate("shared-pool", events=3)
    big = get(mid, "big")
    assert big.exclusive and len(cpus(big)) == 4
    for pod in ("frontend", "batch"):
        assert cpus(get(mid, pod)) == m.cpus - cpus(big)
        assert len(cpus(get(mid, pod))) == 4


def check_reserved_cpus(r: SimulationResult) -> None:
    reserved = r.scenario.config.reserved_cpus
    assert reserved == CPUSet.of([0, 4])
    for c in r.containers:
        if c.namespace == "kube-system":
            assert cpus(c) == reserved and c.pool == "reserved"
        else:
            assert cpus(c).isdisjoint(reserved)
    assert get(r, "db").exclusive and len(cpus(get(r, "db"))) == 4
    assert not get(r, "coredns", "coredns").exclusive


def check_isolated_cpus(r: SimulationResult) -> None:
    isolated = r.machine.isolated
    assert isolated == CPUSet.of([3, 7])
    assert not get(r, "shared").exclusive
    assert cpus(get(r, "shared")).isdisjoint(isolated)
    assert cpus(get(r, "plain")).isdisjoint(isolated)
    realtime = get(r, "realtime")
    assert realtime.exclusive and cpus(realtime) == isolated


def check_affinity(r: SimulationResult) -> None:
    m = r.machine
    client, cache = get(r, "client"), get(r, "cache")
    assert nodes_of(m, cpus(client)) == nodes_of(m, cpus(cache))
    # The pull won over an idle node: some NUMA node runs nobody at all.
    used = set().union(*(nodes_of(m, cpus(c)) for c in r.containers))
    assert used != {n.id for n in m.iter_numa_nodes()}
    # Without affinity the three others spread over three different nodes.
    assert len({frozenset(nodes_of(m, cpus(get(r, p)))) for p in ("queue", "log", "cache")}) == 3


def check_anti_affinity(r: SimulationResult) -> None:
    m = r.machine
    replicas = [get(r, f"web-{i}", "server") for i in range(4)]
    nodes = [nodes_of(m, cpus(c)) for c in replicas]
    assert all(len(n) == 1 for n in nodes)
    assert len(set.union(*nodes)) == 4
    assert sockets_of(m, cpus(replicas[0])) != sockets_of(m, cpus(replicas[1]))
    per_socket = [len([c for c in replicas if sockets_of(m, cpus(c)) == {s.id}]) for s in m.sockets]
    assert per_socket == [2, 2]


def check_capacity_compromise(r: SimulationResult) -> None:
    m = r.machine
    db, client = get(r, "db"), get(r, "client")
    (db_node,) = nodes_of(m, cpus(db))
    assert cpus(db) == m.numa_node(db_node).cpus  # nothing left there
    assert db_node not in nodes_of(m, cpus(client))
    assert sockets_of(m, cpus(client)) == sockets_of(m, cpus(db))


def check_init_container(r: SimulationResult) -> None:
    serve = get(r, "migrate-then-serve", "serve")
    assert [c.name for c in r.containers] == ["serve"]  # migrate exited
    # 6 CPUs, one always shared: 4 exclusive twice only if migrate's came back.
    assert len(r.machine.cpus) == 6
    assert serve.exclusive and len(cpus(serve)) == 4
    assert [d.name for d in r.decisions][:2] == ["migrate", "serve"]
    assert r.errors == ()


def check_refusals(r: SimulationResult) -> None:
    refused = {(e.pod, e.name): e for e in r.errors}
    assert set(refused) == {("greedy", "huge"), ("typo", "main"), ("broken-affinity", "main")}
    assert refused["greedy", "huge"].code == "RESOURCE_EXHAUSTED"
    assert "8 exclusive CPUs" in refused["greedy", "huge"].message
    assert refused["typo", "main"].code == "INVALID_ARGUMENT"
    assert "maybe" in refused["typo", "main"].message
    assert refused["broken-affinity", "main"].code == "INVALID_ARGUMENT"
    assert {(c.pod, c.name) for c in r.containers} == {("greedy", "fine"), ("typo", "helper")}


def check_web_cache(r: SimulationResult) -> None:
    m = r.machine
    reserved = r.scenario.config.reserved_cpus
    for pod in ("web-0", "web-1"):
        app, cache = get(r, pod, "app"), get(r, pod, "cache")
        assert len(nodes_of(m, cpus(app))) == 1
        assert nodes_of(m, cpus(app)) == nodes_of(m, cpus(cache))
        assert cpus(app).isdisjoint(reserved)
    assert cpus(get(r, "kube-proxy", "kube-proxy")) == reserved


def check_restarts(r: SimulationResult) -> None:
    m = r.machine
    node0, node1 = m.numa_node(0), m.numa_node(1)
    # Up to the first db removal, with `restart: keep` in between: api widened back
    # to all of socket 0, as it does without the restart.
    kept = simulate("restarts", events=4)
    assert {(c.pod, c.pool, c.cpuset_cpus) for c in kept.containers} == {
        ("api", "socket0", str(m.sockets[0].cpus))
    }
    # At the end, after the state file was lost and then corrupted: the exclusive
    # cache kept its CPUs, api was adopted where the runtime ran it (node 1's
    # shared CPUs, so numa1) and kept that place when db went.
    cache, api = get(r, "cache"), get(r, "api")
    assert cache.exclusive and len(cpus(cache)) == 2 and cpus(cache).is_subset(node1.cpus)
    assert api.pool == "numa1" and cpus(api) == node1.cpus - cpus(cache)
    assert cpus(api).isdisjoint(node0.cpus)


def check_cri_resource_manager(r: SimulationResult) -> None:
    m = r.machine
    db0, db1, client = get(r, "db-0"), get(r, "db-1"), get(r, "client")
    # Joint key ":-:pod/labels/app-name" (separators "-" and ":") pushes the replicas apart.
    assert sockets_of(m, cpus(db0)).isdisjoint(sockets_of(m, cpus(db1)))
    # "db-[^0]" is Go's negation: the client joins db-1, not db-0.
    assert nodes_of(m, cpus(client)) == nodes_of(m, cpus(db1))
    assert sockets_of(m, cpus(client)).isdisjoint(sockets_of(m, cpus(db0)))
    # app is placed before cache and only app's list names cache, yet the cache joins
    # app (the shorthand is symmetric) while a NUMA node stays idle.
    app, cache = get(r, "web", "app"), get(r, "web", "cache")
    assert [d.name for d in r.decisions if d.pod == "web"] == ["app", "cache"]
    assert nodes_of(m, cpus(cache)) == nodes_of(m, cpus(app))
    used = set().union(*(nodes_of(m, cpus(c)) for c in r.containers))
    assert used != {n.id for n in m.iter_numa_nodes()}
    assert r.errors == ()


def check_replicas_apart(r: SimulationResult) -> None:
    m = r.machine
    sockets = [sockets_of(m, cpus(get(r, f"db-{n}"))) for n in range(2)]
    assert all(len(s) == 1 for s in sockets) and sockets[0] != sockets[1]
    (refused,) = r.errors
    assert (refused.pod, refused.code) == ("db-2", "FAILED_PRECONDITION")
    assert "every socket already runs a pod matching app=db" in refused.message


def check_near_the_cache(r: SimulationResult) -> None:
    m = r.machine
    assert nodes_of(m, cpus(get(r, "cache"))) == {5}
    assert nodes_of(m, cpus(get(r, "web"))) == {5}


def check_first_of_its_kind(r: SimulationResult) -> None:
    m = r.machine
    where = {frozenset(sockets_of(m, cpus(get(r, f"svc-{n}")))) for n in range(3)}
    assert len(where) == 1 and len(next(iter(where))) == 1
    (refused,) = r.errors
    assert refused.pod == "stranger" and "no running pod matches app=cache" in refused.message


def check_everyone_out(r: SimulationResult) -> None:
    m = r.machine
    assert [(e.pod, e.code) for e in r.errors] == [
        ("greedy", "INVALID_ARGUMENT"),
        ("sneaky", "INVALID_ARGUMENT"),
    ]
    assert all("exclusive_domain_namespaces" in e.message for e in r.errors)
    solver, web, own = get(r, "solver"), get(r, "web"), get(r, "own-core")
    assert sockets_of(m, cpus(web)).isdisjoint(sockets_of(m, cpus(solver)))
    own_cores = [c for c in cores_touched(m, cpus(own))]
    assert all(core.isdisjoint(cpus(web)) for core in own_cores)


def check_daemon_beside_a_loner(r: SimulationResult) -> None:
    m = r.machine
    loner = sockets_of(m, cpus(get(r, "loner")))
    assert sockets_of(m, cpus(get(r, "log-agent"))) == loner
    assert sockets_of(m, cpus(get(r, "api"))).isdisjoint(loner)


def check_even_spread(r: SimulationResult) -> None:
    m = r.machine
    per_node = [0, 0, 0]
    for n in range(6):
        (node,) = nodes_of(m, cpus(get(r, f"web-{n}")))
        per_node[node] += 1
    assert per_node == [2, 2, 2]
    assert r.errors == ()


def check_replica_comes_back(r: SimulationResult) -> None:
    m = r.machine
    assert [(e.pod, e.code) for e in r.errors] == [("db-2", "FAILED_PRECONDITION")]
    before = simulate("replica-comes-back", events=2)
    assert cpus(get(r, "db-0")) == cpus(get(before, "db-0"))  # its very CPUs back
    assert sockets_of(m, cpus(get(r, "db-0"))).isdisjoint(sockets_of(m, cpus(get(r, "db-1"))))


def check_resize_after_target_left(r: SimulationResult) -> None:
    assert r.errors == ()
    placed = simulate("resize-after-target-left", events=2)
    cache = nodes_of(placed.machine, cpus(get(placed, "cache")))
    assert nodes_of(r.machine, cpus(get(r, "web"))) == cache
    assert [d.pool for d in r.decisions if d.pod == "web"] == ["numa0"] * 3


def check_numa_node_labels(r: SimulationResult) -> None:
    m = r.machine
    nic_node = next(n.numa_node for n in m.nics if n.name == "ens5f0")
    assert nodes_of(m, cpus(get(r, "packets"))) == {nic_node}
    assert 1 not in nodes_of(m, cpus(get(r, "batch")))
    assert nodes_of(m, cpus(get(r, "filler"))) == {3}
    # Preferred node 3 had no room left: placed elsewhere, placed all the same.
    assert 3 not in nodes_of(m, cpus(get(r, "report")))
    assert r.errors == ()


def check_hybrid_cores(r: SimulationResult) -> None:
    m = r.machine
    performance, efficiency = m.class_cpus("performance"), m.class_cpus("efficiency")
    assert performance and efficiency
    db, batch = get(r, "db"), get(r, "batch")
    assert db.exclusive and cpus(db).is_subset(performance) and len(cpus(db)) == 4
    assert batch.exclusive and cpus(batch).is_subset(efficiency) and len(cpus(batch)) == 2
    app, logger, ui = get(r, "web", "app"), get(r, "web", "logger"), get(r, "ui")
    exclusive = cpus(db) | cpus(batch)
    assert cpus(app) == performance - exclusive
    assert cpus(logger) == efficiency - exclusive
    assert cpus(ui) == m.cpus - exclusive
    [refused] = r.errors
    assert (refused.pod, refused.code) == ("too-many", "RESOURCE_EXHAUSTED")
    assert "exclusive efficiency CPUs" in refused.message


def check_far_memory(r: SimulationResult) -> None:
    m = r.machine
    for pod, name, far in (
        ("cache", "main", True),
        ("latency", "main", False),
        ("mixed", "lookup", False),
        ("mixed", "loader", True),
    ):
        c = get(r, pod, name)
        own = nodes_of(m, cpus(c))
        attached = {x.id for x in m.memory_only_nodes if x.closest_cpu_node in own}
        assert attached, (pod, name)
        assert set(CPUSet.parse(c.cpuset_mems)) == (own | attached if far else own), (pod, name)


CHECKS: dict[str, Callable[[SimulationResult], None]] = {
    "exclusive-whole-cores": check_exclusive_whole_cores,
    "numa-packing": check_numa_packing,
    "shared-pool": check_shared_pool,
    "reserved-cpus": check_reserved_cpus,
    "isolated-cpus": check_isolated_cpus,
    "affinity": check_affinity,
    "anti-affinity": check_anti_affinity,
    "capacity-compromise": check_capacity_compromise,
    "init-container": check_init_container,
    "refusals": check_refusals,
    "web-cache": check_web_cache,
    "restarts": check_restarts,
    "cri-resource-manager": check_cri_resource_manager,
    "replicas-apart": check_replicas_apart,
    "near-the-cache": check_near_the_cache,
    "first-of-its-kind": check_first_of_its_kind,
    "everyone-out": check_everyone_out,
    "daemon-beside-a-loner": check_daemon_beside_a_loner,
    "even-spread": check_even_spread,
    "replica-comes-back": check_replica_comes_back,
    "resize-after-target-left": check_resize_after_target_left,
    "numa-node-labels": check_numa_node_labels,
    "hybrid-cores": check_hybrid_cores,
    "far-memory": check_far_memory,
}


def test_every_example_has_a_check() -> None:
    assert {p.stem for p in EXAMPLES.glob("*.yaml")} == set(CHECKS)


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_example(name: str) -> None:
    result = simulate(name)
    CHECKS[name](result)
    # Whatever the example: nobody else runs on a container's exclusive CPUs,
    # and memory is pinned to the NUMA nodes of the CPUs.
    for c in result.containers:
        if c.exclusive:
            others = [o for o in result.containers if o is not c]
            assert all(cpus(o).isdisjoint(cpus(c)) for o in others), c
        if c.pool != "reserved":
            # The nodes of its CPUs, and (memory-tiers: dram+far) the memory-only
            # nodes attached to them.
            own = nodes_of(result.machine, cpus(c))
            far = {x.id for x in result.machine.memory_only_nodes if x.closest_cpu_node in own}
            assert own <= set(CPUSet.parse(c.cpuset_mems)) <= own | far
