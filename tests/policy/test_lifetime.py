"""A pod's place holds for its whole life (docs/pod-rules.md, "A pod's life"), at the
policy: tables over machine shapes. Expected places are worked out from the Machine."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from agent.policy.errors import RuleUnsatisfied
from agent.policy.explain import MAX_LISTED, MAX_NOTES
from agent.policy.request import ContainerRequest
from agent.rules import Level
from agent.workload import ContainerInfo
from tests.policy.test_pod_rules import (
    DB,
    SHAPES,
    B,
    Machines,
    affinity,
    policy,
    request,
    term,
    touched,
)
from topology.cpuset import CPUSet

APART = affinity(anti_required=[term(DB, Level.SOCKET)])
CACHE = {"matchLabels": {"app": "cache"}}


def recreated(req: ContainerRequest, attempt: int = 1) -> ContainerRequest:
    """kubelet's re-create of the container: same sandbox and name, another key."""
    return replace(req, key=f"{req.key}/{attempt}")


def sandbox(req: ContainerRequest, sandbox_id: str) -> ContainerRequest:
    pod = replace(req.container.pod, id=sandbox_id)
    return replace(req, container=ContainerInfo(req.container.name, pod))


@pytest.mark.parametrize("shape", SHAPES)
def test_an_exited_replica_keeps_its_domains_and_gets_its_cpus_back(
    machines: Machines, shape: str
) -> None:
    m = machines(shape)
    pol = policy(m)
    sockets = len(m.sockets)
    replicas = [
        sandbox(request(f"db-{n}", 2000, labels={"app": "db"}, rules=APART), f"s{n}")
        for n in range(sockets + 1)
    ]
    placed = [pol.place(r) for r in replicas[:sockets]]
    pol.exited(placed[0].key)
    pol.check_invariants()
    with pytest.raises(RuleUnsatisfied):
        pol.place(replicas[sockets])  # db-0 still occupies its socket
    again = pol.place(recreated(replicas[0]))
    assert again.replaced == placed[0].key and placed[0].key not in pol.records()
    assert again.cpus == placed[0].cpus
    pol.check_invariants()
    # Only the sandbox stopping gives the socket back.
    pol.release_sandbox("s0")
    assert pol.place(replicas[sockets]).exclusive
    pol.check_invariants()


@pytest.mark.parametrize("shape", SHAPES)
def test_a_resize_stays_in_the_pods_domains_after_its_target_left(
    machines: Machines, shape: str
) -> None:
    m = machines(shape)
    pol = policy(m)
    cache = pol.place(request("cache", 2000, labels={"app": "cache"}))
    rules = affinity(required=[term(CACHE, Level.NUMA)])
    web = request("web", 500, qos=B, rules=rules)
    first = pol.place(web)
    near = touched(m, Level.NUMA, cache.cpus)
    assert touched(m, Level.NUMA, first.cpus) == near
    pol.release(cache.key)
    bigger = replace(web, resources=replace(web.resources, cpu_shares=600 * 1024 // 1000))
    assert touched(m, Level.NUMA, pol.resize(bigger).cpus) == near
    node_cpus = len(next(n for n in m.iter_numa_nodes() if n.id == near[0]).cpus)
    huge = replace(web, resources=replace(web.resources, cpu_shares=2 * node_cpus * 1024))
    with pytest.raises(RuleUnsatisfied, match="the pod's place"):
        pol.resize(huge)
    assert touched(m, Level.NUMA, pol.current(web.key).cpus) == near  # type: ignore[union-attr]
    pol.check_invariants()


@pytest.mark.parametrize("shape", SHAPES)
def test_later_containers_of_a_pod_stay_in_its_domains(machines: Machines, shape: str) -> None:
    """A pod's second container is not checked against the rules again, but stays
    in the domains its first container's rules chose."""
    m = machines(shape)
    pol = policy(m)
    a = pol.place(request("db-0", 2000, labels={"app": "db"}, rules=APART, container="a"))
    b = pol.place(request("db-0", 2000, labels={"app": "db"}, rules=APART, container="b"))
    assert touched(m, Level.SOCKET, a.cpus) == touched(m, Level.SOCKET, b.cpus)
    pol.check_invariants()


@pytest.mark.parametrize("shape", ("xeon-2s-2numa", "epyc-2s-nps4"))
def test_a_preferred_anti_affinity_at_core_ranks_the_exclusive_cpus(
    machines: Machines, shape: str
) -> None:
    """web prefers cache's NUMA node and not cache's core: it gets a core of its own
    in that node, not cache's sibling thread (which best fit alone would pick)."""
    m = machines(shape)
    pol = policy(m)
    cache = pol.place(request("cache", 1000, labels={"app": "cache"}))
    rules = affinity(
        preferred=[term(CACHE, Level.NUMA, weight=10)],
        anti_preferred=[term(CACHE, Level.CORE, weight=50)],
    )
    web = pol.place(request("web", 1000, rules=rules))
    assert touched(m, Level.NUMA, web.cpus) == touched(m, Level.NUMA, cache.cpus)
    assert touched(m, Level.CORE, web.cpus) != touched(m, Level.CORE, cache.cpus)
    assert web.score == 10


def test_the_spread_skew_counts_the_pod_only_where_it_matches_its_own_selector(
    machines: Machines,
) -> None:
    """The KEP's selfMatch: a pod that its own constraint does not select adds
    nothing to a domain's count."""
    m = machines("xeon-2s-2numa")
    pol = policy(m)
    pol.place_in(request("web-0", 1000, labels={"app": "web"}), "numa0")
    spread = json.dumps(
        [
            {
                "maxSkew": 1,
                "topologyKey": "numa-agent.io/numa",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
            }
        ]
    )
    other = request("batch", 1000, labels={"app": "batch"}, spread=spread)
    assert pol.place_in(other, "numa0").pool == "numa0"  # 1 - 0 = 1, not 2
    again = request("web-1", 1000, labels={"app": "web"}, spread=spread)
    with pytest.raises(RuleUnsatisfied):
        pol.place_in(again, "numa0")  # it matches: 1 + 1 - 0 = 2


def test_a_refusal_names_only_the_rules_that_fail_everywhere(machines: Machines) -> None:
    m = machines("xeon-2s-2numa")
    pol = policy(m)
    pol.place_in(request("db-0", 2000, labels={"app": "db"}), "numa0")
    pol.place_in(request("db-1", 2000, labels={"app": "db"}), "numa2")
    spread = json.dumps([{"maxSkew": 1, "topologyKey": "numa-agent.io/numa", "labelSelector": DB}])
    with pytest.raises(RuleUnsatisfied) as refused:
        pol.place(request("db-2", 2000, labels={"app": "db"}, rules=APART, spread=spread))
    text = str(refused.value)
    assert "podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]" in text
    assert "topology-spread-constraints" not in text  # numa1 and numa3 satisfy it


def test_the_explanation_lists_the_pools_required_rules_exclude(machines: Machines) -> None:
    m = machines("xeon-2s-2numa")
    pol = policy(m)
    db = pol.place_in(request("db-0", 2000, labels={"app": "db"}), "numa0")
    d = pol.place(request("db-1", 2000, labels={"app": "db"}, rules=APART))
    (line,) = [x for x in d.explanation.splitlines() if "excluded by required rules" in x]
    for socket in touched(m, Level.SOCKET, db.cpus):
        assert f"socket{socket}: fails numa-agent.io/affinity" in line


def test_explanations_are_bounded_whatever_the_number_of_pods(machines: Machines) -> None:
    m = machines("server-4s")
    pol = policy(m)
    rules = affinity(
        anti_preferred=[term({"matchLabels": {"tier": "web"}}, Level.NUMA, weight=5)],
        preferred=[term({"matchLabels": {"tier": "web"}}, Level.SOCKET, weight=3)],
    )
    sizes = []
    for n in range(300):
        d = pol.place(request(f"w-{n}", 100, qos=B, labels={"tier": "web"}, rules=rules))
        sizes.append(len(d.explanation))
        for line in d.explanation.splitlines():
            if line.startswith("  rules for "):
                assert line.count(";") < MAX_NOTES
    assert max(sizes[100:]) <= max(sizes[:100]) + 200  # no growth with the pods placed
    assert max(sizes) < 400 * (MAX_LISTED + 4)
    pol.check_invariants()


def test_an_init_containers_place_goes_back_when_the_next_container_comes(
    machines: Machines,
) -> None:
    m = machines("xeon-2s-2numa")
    pol = policy(m)
    init = sandbox(request("job", 2000, rules=APART, labels={"app": "db"}, container="init"), "j")
    app = sandbox(request("job", 2000, rules=APART, labels={"app": "db"}, container="app"), "j")
    first = pol.place(init)
    pol.exited(first.key)
    second = pol.place(app)
    assert first.key not in pol.records()
    assert touched(m, Level.SOCKET, second.cpus) == touched(m, Level.SOCKET, first.cpus)
    assert CPUSet(second.cpus.mask & first.cpus.mask) or len(second.cpus) == 2
    pol.check_invariants()
