"""Pod affinity and anti-affinity inside the machine (numa-agent.io/affinity), rule by
rule, over several machine shapes: levels, occupancy, selectors and namespaces,
required and preferred terms, symmetry, the first-pod exception, daemons, the
denial-of-service guard, and how they combine with capacity and scores.

Expected places are worked out from the Machine (which socket, die, NUMA node,
L3 group and core each CPU is in), never copied from the policy's output.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import pytest

from agent.affinity import parse_pod_affinities
from agent.policy.closeness import closeness_table
from agent.policy.config import PolicyConfig
from agent.policy.errors import InvalidRequest, ResourceExhausted, RuleUnsatisfied
from agent.policy.policy import Decision, Policy
from agent.policy.request import ContainerRequest, Resources
from agent.rules import Level, parse_pod_rules
from agent.workload import ContainerInfo, PodInfo, QoSClass
from topology.cpuset import CPUSet
from topology.tree import Machine

Machines = Callable[[str], Machine]
G, B, BE = QoSClass.GUARANTEED, QoSClass.BURSTABLE, QoSClass.BESTEFFORT
SHAPES = ("xeon-2s-2numa", "dies-2-per-socket", "epyc-2s-nps4", "server-4s")


def domains_of(machine: Machine, level: Level) -> list[CPUSet]:
    """The domains of a level, worked out from the tree."""
    if level is Level.HOST:
        return [machine.cpus]
    if level is Level.SOCKET:
        return [s.cpus for s in machine.sockets]
    if level is Level.DIE:
        return [d.cpus for d in machine.iter_dies()]
    if level is Level.NUMA:
        return [n.cpus for n in machine.iter_numa_nodes()]
    if level is Level.L3:
        return [g.cpus for g in machine.iter_l3_groups()]
    return [c.cpus for c in machine.iter_cores()]


def touched(machine: Machine, level: Level, cpus: CPUSet) -> list[int]:
    return [i for i, d in enumerate(domains_of(machine, level)) if d & cpus]


def term(
    selector: Mapping[str, Any] | None,
    level: Level,
    *,
    weight: int | None = None,
    namespaces: list[str] | None = None,
    all_namespaces: bool = False,
) -> dict[str, Any]:
    body: dict[str, Any] = {"topologyKey": str(level)}
    if selector is not None:
        body["labelSelector"] = selector
    if namespaces is not None:
        body["namespaces"] = namespaces
    if all_namespaces:
        body["namespaceSelector"] = {}
    if weight is None:
        return body
    return {"weight": weight, "podAffinityTerm": body}


def affinity(
    *,
    required: list[dict[str, Any]] = (),  # type: ignore[assignment]
    preferred: list[dict[str, Any]] = (),  # type: ignore[assignment]
    anti_required: list[dict[str, Any]] = (),  # type: ignore[assignment]
    anti_preferred: list[dict[str, Any]] = (),  # type: ignore[assignment]
    execution: bool = False,
) -> str:
    """The numa-agent.io/affinity annotation (as JSON, which is YAML too)."""
    req = "requiredDuringScheduling" + ("Required" if execution else "Ignored") + "DuringExecution"
    pref = "preferredDuringSchedulingIgnoredDuringExecution"
    out: dict[str, Any] = {}
    for name, hard, soft in (
        ("podAffinity", required, preferred),
        ("podAntiAffinity", anti_required, anti_preferred),
    ):
        part: dict[str, Any] = {}
        if hard:
            part[req] = list(hard)
        if soft:
            part[pref] = list(soft)
        if part:
            out[name] = part
    return json.dumps(out)


def request(
    name: str,
    milli: int = 1000,
    *,
    qos: QoSClass = G,
    labels: Mapping[str, str] | None = None,
    namespace: str = "default",
    rules: str | None = None,
    spread: str | None = None,
    pod: str | None = None,
    container: str = "main",
) -> ContainerRequest:
    annotations = {}
    if rules is not None:
        annotations["numa-agent.io/affinity"] = rules
    if spread is not None:
        annotations["numa-agent.io/topology-spread-constraints"] = spread
    pod_name = pod or name
    info = PodInfo(
        uid=f"uid-{namespace}-{pod_name}",
        name=pod_name,
        namespace=namespace,
        qosclass=qos,
        labels=dict(labels or {}),
        annotations=annotations,
    )
    c = ContainerInfo(name=container, pod=info)
    if qos is BE:
        res = Resources(cpu_shares=2)
    elif qos is G:
        res = Resources(milli * 1024 // 1000, milli * 100, 100_000, 1 << 30)
    else:
        res = Resources(cpu_shares=milli * 1024 // 1000)
    return ContainerRequest(
        f"{namespace}/{pod_name}/{container}", c, res, (), parse_pod_rules(annotations)
    )


def policy(machine: Machine, **config: object) -> Policy:
    return Policy(machine, PolicyConfig.from_mapping(config))


DB = {"matchLabels": {"app": "db"}}


# -- levels: two replicas never share a domain of the level -------------------------


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("level", [Level.SOCKET, Level.DIE, Level.NUMA, Level.L3, Level.HOST])
def test_required_anti_affinity_keeps_replicas_apart_at_each_level(
    machines: Machines, shape: str, level: Level
) -> None:
    m = machines(shape)
    pol = policy(m)
    rules = affinity(anti_required=[term(DB, level)])
    placed: list[Decision] = []
    for n in range(len(domains_of(m, level)) + 1):
        try:
            placed.append(pol.place(request(f"db-{n}", 2000, labels={"app": "db"}, rules=rules)))
        except RuleUnsatisfied as refused:
            assert "required anti-affinity at " + str(level) in str(refused)
            assert "already runs a pod matching app=db" in str(refused)
            break
    else:
        pytest.fail("more replicas placed than there are domains")
    # Exactly one replica per domain, each within one.
    assert len(placed) == len(domains_of(m, level))
    seen = [touched(m, level, d.cpus) for d in placed]
    assert all(len(t) == 1 for t in seen)
    assert sorted(t[0] for t in seen) == list(range(len(placed)))
    pol.check_invariants()


@pytest.mark.parametrize("shape", ["xeon-2s-2numa", "epyc-2s-nps4"])
def test_required_anti_affinity_at_core_gives_each_replica_its_own_cores(
    machines: Machines, shape: str
) -> None:
    """At the core level two exclusive replicas never share a core: an odd request
    that leaves a free thread does not let the next replica take it."""
    m = machines(shape)
    pol = policy(m)
    rules = affinity(anti_required=[term(DB, Level.CORE)])
    a = pol.place(request("db-0", 1000, labels={"app": "db"}, rules=rules))
    b = pol.place(request("db-1", 1000, labels={"app": "db"}, rules=rules))
    assert not set(touched(m, Level.CORE, a.cpus)) & set(touched(m, Level.CORE, b.cpus))
    # Without the rule, best fit would put the second on the sibling thread.
    plain = policy(m)
    c = plain.place(request("db-0", 1000, labels={"app": "db"}))
    d = plain.place(request("db-1", 1000, labels={"app": "db"}))
    assert touched(m, Level.CORE, c.cpus) == touched(m, Level.CORE, d.cpus)


# -- occupancy ------------------------------------------------------------------------


def test_a_shared_container_occupies_its_whole_pool(machines: Machines) -> None:
    m = machines("xeon-2s-2numa")
    pol = policy(m)
    rules = affinity(anti_required=[term(DB, Level.NUMA)])
    first = pol.place(request("db-0", 500, qos=B, labels={"app": "db"}, rules=rules))
    # A shared container in socket0 would occupy both of its NUMA nodes.
    assert first.pool.startswith("numa")
    second = pol.place(request("db-1", 500, qos=B, labels={"app": "db"}, rules=rules))
    node_a = touched(m, Level.NUMA, first.cpus)
    node_b = touched(m, Level.NUMA, second.cpus)
    assert node_a != node_b
    # The socket pools span a node db occupies: never a candidate for the next one.
    pools = {p.name: p.cpus for p in pol.tree.pools}
    third = pol.place(request("db-2", 500, qos=B, labels={"app": "db"}, rules=rules))
    assert third.pool not in ("machine",) and not pools[third.pool] & (first.cpus | second.cpus)


def test_removed_containers_occupy_nothing(machines: Machines) -> None:
    m = machines("xeon-2s-2numa")
    pol = policy(m)
    rules = affinity(anti_required=[term(DB, Level.SOCKET)])
    for n in range(2):
        pol.place(request(f"db-{n}", 2000, labels={"app": "db"}, rules=rules))
    with pytest.raises(RuleUnsatisfied):
        pol.place(request("db-2", 2000, labels={"app": "db"}, rules=rules))
    pol.release("default/db-0/main")
    assert pol.place(request("db-2", 2000, labels={"app": "db"}, rules=rules)).exclusive


def test_reserved_containers_occupy_the_reserved_cpus(machines: Machines) -> None:
    """(kube-system is no daemon here: daemons are invisible to anti-affinity.)"""
    m = machines("xeon-2s-2numa")
    pol = policy(
        m, reserved_cpus="0", system_namespaces=[], exclusive_domain_namespaces=["default"]
    )
    pol.place(request("proxy", 100, qos=B, namespace="kube-system", labels={"app": "proxy"}))
    rules = affinity(
        anti_required=[term({"matchLabels": {"app": "proxy"}}, Level.SOCKET, all_namespaces=True)]
    )
    web = pol.place(request("web", 2000, labels={"app": "web"}, rules=rules))
    assert touched(m, Level.SOCKET, web.cpus) == [1]


# -- which containers a term matches ------------------------------------------------------


SELECTORS = [
    ({"matchLabels": {"app": "db"}}, {"db"}),
    (
        {"matchExpressions": [{"key": "app", "operator": "In", "values": ["db", "cache"]}]},
        {"db", "cache"},
    ),
    (
        {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]},
        {"cache", "plain"},
    ),
    ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {"db", "cache"}),
    ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, {"plain"}),
    ({}, {"db", "cache", "plain"}),
    (None, set()),
]


@pytest.mark.parametrize(("selector", "repels"), SELECTORS)
def test_selectors_decide_which_pods_a_term_repels(
    machines: Machines, selector: dict[str, Any] | None, repels: set[str]
) -> None:
    """One pod per socket... of a four-socket machine: db, cache and plain on sockets
    0-2. A newcomer anti-affine at socket level to `selector` may go only where
    nothing it repels runs."""
    m = machines("server-4s")
    pol = policy(m)
    labels = {
        "db": {"app": "db", "tier": "data"},
        "cache": {"app": "cache", "tier": "data"},
        "plain": {"app": "plain"},
    }
    where: dict[str, int] = {}
    for n, name in enumerate(("db", "cache", "plain")):
        decision = pol.place_in(request(name, 4000, labels=labels[name]), f"socket{n}")
        where[name] = touched(m, Level.SOCKET, decision.cpus)[0]
    rules = affinity(anti_required=[term(selector, Level.SOCKET)])
    allowed = set(range(4)) - {where[name] for name in repels}
    got = set()
    for n in range(4):
        try:
            d = pol.place(request(f"new-{n}", 1000, labels={"app": "new"}, rules=rules))
        except RuleUnsatisfied:
            break
        got.update(touched(m, Level.SOCKET, d.cpus))
    assert got <= allowed and got  # some place found, never next to what it repels
    assert {s for s in allowed if s not in got} <= allowed


@pytest.mark.parametrize(
    ("scope", "namespace", "repelled"),
    [
        ({}, "shop", False),  # absent: the pod's own namespace only
        ({}, "default", True),
        ({"namespaces": ["shop"]}, "shop", True),
        ({"namespaces": ["shop"]}, "default", False),
        ({"all_namespaces": True}, "shop", True),
        ({"all_namespaces": True, "namespaces": ["x"]}, "shop", True),
    ],
)
def test_namespaces_decide_which_pods_a_term_sees(
    machines: Machines, scope: dict[str, Any], namespace: str, repelled: bool
) -> None:
    m = machines("xeon-2s-2numa")
    pol = policy(m, exclusive_domain_namespaces=["default"])  # may reach other namespaces
    pol.place_in(request("db", 4000, labels={"app": "db"}, namespace=namespace), "socket0")
    rules = affinity(anti_required=[term(DB, Level.SOCKET, **scope)])
    placed = []
    for n in range(2):
        try:
            placed.append(pol.place(request(f"new-{n}", 1000, labels={"app": "x"}, rules=rules)))
        except RuleUnsatisfied:
            break
    sockets = {s for d in placed for s in touched(m, Level.SOCKET, d.cpus)}
    assert (0 not in sockets) is repelled


def test_a_pod_never_repels_itself_but_attracts_itself(machines: Machines) -> None:
    """Two containers of one pod with anti-affinity to their own label share a socket;
    with affinity to it, the second follows the first."""
    m = machines("xeon-2s-2numa")
    pol = policy(m)
    anti = affinity(anti_required=[term(DB, Level.NUMA)])
    a = pol.place(request("db", 2000, labels={"app": "db"}, rules=anti, container="a"))
    b = pol.place(request("db", 2000, labels={"app": "db"}, rules=anti, container="b"))
    assert a.exclusive and b.exclusive
    near = affinity(required=[term(DB, Level.NUMA)])
    pol2 = policy(m)
    c = pol2.place(request("db", 2000, labels={"app": "db"}, rules=near, container="a"))
    pol2.place(request("filler", 6000))  # tempt the second elsewhere by best fit
    d = pol2.place(request("db", 2000, labels={"app": "db"}, rules=near, container="b"))
    assert touched(m, Level.NUMA, c.cpus) == touched(m, Level.NUMA, d.cpus)


# -- required affinity ------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("level", [Level.SOCKET, Level.DIE, Level.NUMA, Level.L3])
def test_required_affinity_places_inside_one_domain_with_a_match(
    machines: Machines, shape: str, level: Level
) -> None:
    m = machines(shape)
    pol = policy(m)
    last = domains_of(m, level)[-1]
    cache = pol.place(request("cache", 1000, labels={"app": "cache"}))
    # Put the cache in the last domain of the level, away from where best fit goes.
    pol.release(cache.key)
    holder = next(p for p in pol.tree.pools if p.cpus.is_subset(last))
    pol.place_in(request("cache", 1000, labels={"app": "cache"}), holder.name)
    rules = affinity(required=[term({"matchLabels": {"app": "cache"}}, level)])
    for qos, milli in ((G, 2000), (B, 500)):
        web = pol.place(request(f"web-{qos}", milli, qos=qos, labels={"app": "web"}, rules=rules))
        assert web.cpus.is_subset(last), (qos, web.pool)


def test_the_first_pod_of_its_kind_is_placed_anywhere(machines: Machines) -> None:
    """The Kubernetes design's 'first pod of a service': affinity to its own label,
    nothing matching runs yet, it matches its own term: it goes anywhere; the next
    replica then follows it."""
    m = machines("xeon-2s-2numa")
    pol = policy(m)
    rules = affinity(required=[term({"matchLabels": {"app": "svc"}}, Level.SOCKET)])
    first = pol.place(request("svc-0", 2000, labels={"app": "svc"}, rules=rules))
    second = pol.place(request("svc-1", 2000, labels={"app": "svc"}, rules=rules))
    assert touched(m, Level.SOCKET, first.cpus) == touched(m, Level.SOCKET, second.cpus)


def test_affinity_to_nothing_that_runs_is_refused_with_why(machines: Machines) -> None:
    m = machines("xeon-2s-2numa")
    pol = policy(m)
    rules = affinity(required=[term({"matchLabels": {"app": "cache"}}, Level.NUMA)])
    with pytest.raises(RuleUnsatisfied) as refused:
        pol.place(request("web", 1000, labels={"app": "web"}, rules=rules))
    text = str(refused.value)
    assert "podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]" in text
    assert "required affinity at numa-agent.io/numa" in text
    assert "no running pod matches app=cache" in text


def test_required_during_execution_is_required_at_placement(machines: Machines) -> None:
    m = machines("xeon-2s-2numa")
    pol = policy(m)
    rules = affinity(anti_required=[term(DB, Level.SOCKET)], execution=True)
    for n in range(2):
        pol.place(request(f"db-{n}", 1000, labels={"app": "db"}, rules=rules))
    with pytest.raises(RuleUnsatisfied, match="requiredDuringSchedulingRequiredDuringExecution"):
        pol.place(request("db-2", 1000, labels={"app": "db"}, rules=rules))


# -- symmetry (the Kubernetes design's S1/S2 cases, inside the node) -----------------


def test_s1_a_running_pods_required_anti_affinity_keeps_the_newcomer_out(
    machines: Machines,
) -> None:
    """S1 runs with anti-affinity to S2 pods; a new S2 pod, with no rules of its own,
    must not land in S1's socket."""
    m = machines("xeon-2s-2numa")
    pol = policy(m)
    s1_rules = affinity(anti_required=[term({"matchLabels": {"service": "S2"}}, Level.SOCKET)])
    s1 = pol.place(request("s1", 2000, labels={"service": "S1"}, rules=s1_rules))
    for n in range(3):
        s2 = pol.place(request(f"s2-{n}", 2000, labels={"service": "S2"}))
        assert touched(m, Level.SOCKET, s2.cpus) != touched(m, Level.SOCKET, s1.cpus)


def test_s2_a_running_pods_preferred_affinity_pulls_the_newcomer(machines: Machines) -> None:
    """S1 runs with a preferred affinity to S2 at the NUMA level; a new S2 pod with no
    rules of its own goes to S1's NUMA node (the symmetric preference)."""
    m = machines("epyc-2s-nps4")
    pol = policy(m)
    s1_rules = affinity(preferred=[term({"matchLabels": {"service": "S2"}}, Level.NUMA, weight=10)])
    last = list(m.iter_numa_nodes())[-1]
    s1 = pol.place_in(
        request("s1", 2000, labels={"service": "S1"}, rules=s1_rules), f"numa{last.id}"
    )
    s2 = pol.place(request("s2", 2000, labels={"service": "S2"}))
    assert touched(m, Level.NUMA, s2.cpus) == touched(m, Level.NUMA, s1.cpus)
    assert s2.score == 10


def test_a_running_pods_required_affinity_counts_as_a_preference_of_weight_1(
    machines: Machines,
) -> None:
    m = machines("epyc-2s-nps4")
    pol = policy(m)
    s1_rules = affinity(required=[term({"matchLabels": {"service": "S2"}}, Level.NUMA)])
    last = list(m.iter_numa_nodes())[-1]
    # S1 is the first of... no S2 runs: it would be refused; place an S2 first.
    pol.place_in(request("s2-0", 1000, labels={"service": "S2"}), f"numa{last.id}")
    pol.place(request("s1", 1000, labels={"service": "S1"}, rules=s1_rules))
    s2 = pol.place(request("s2-1", 1000, labels={"service": "S2"}))
    assert touched(m, Level.NUMA, s2.cpus) == [len(list(m.iter_numa_nodes())) - 1]
    assert s2.score == 1


# -- preferred terms ---------------------------------------------------------------------


def test_preferred_terms_add_their_weights(machines: Machines) -> None:
    """Cache in numa0, db in numa2 (other socket): a web preferring the cache at weight
    30 and the db at 50 goes to the db; at 80 and 50, to the cache."""
    m = machines("xeon-2s-2numa")
    for w_cache, w_db, expect in ((30, 50, "numa2"), (80, 50, "numa0")):
        pol = policy(m)
        pol.place_in(request("cache", 1000, labels={"app": "cache"}), "numa0")
        pol.place_in(request("db", 1000, labels={"app": "db"}), "numa2")
        rules = affinity(
            preferred=[
                term({"matchLabels": {"app": "cache"}}, Level.NUMA, weight=w_cache),
                term(DB, Level.NUMA, weight=w_db),
            ]
        )
        web = pol.place(request("web", 500, qos=B, labels={"app": "web"}, rules=rules))
        assert web.pool == expect and web.score == max(w_cache, w_db)


def test_preferred_anti_affinity_yields_when_there_is_no_room(machines: Machines) -> None:
    m = machines("xeon-2s-2numa")
    pol = policy(m)
    rules = affinity(anti_preferred=[term(DB, Level.SOCKET, weight=100)])
    a = pol.place(request("db-0", 19_000, labels={"app": "db"}, rules=rules))
    b = pol.place(request("db-1", 19_000, labels={"app": "db"}, rules=rules))
    assert touched(m, Level.SOCKET, a.cpus) != touched(m, Level.SOCKET, b.cpus)
    assert (a.score, b.score) == (0, 0)
    c = pol.place(request("db-2", 19_000, labels={"app": "db"}, rules=rules))
    # No place satisfies its own term (-100) and each socket violates one of the
    # running replicas' terms too (-100): placed anyway.
    assert c.exclusive and c.score == -200


# -- daemons and the denial-of-service guard ----------------------------------------------


def test_daemons_are_invisible_to_required_anti_affinity_both_ways(machines: Machines) -> None:
    """A loner keeps every team-x pod out of its socket. A daemon (kube-system) of team
    x may still run there, and a daemon's own anti-affinity keeps nobody out; with
    system_namespaces empty the same pods are held to the rules."""
    m = machines("xeon-2s-2numa")
    everyone = {"matchLabels": {"team": "x"}}
    loner = affinity(anti_required=[term(everyone, Level.SOCKET, all_namespaces=True)])
    for system, held in (([], True), (["kube-system"], False)):
        pol = policy(
            m,
            reserved_namespaces=[],
            system_namespaces=system,
            exclusive_domain_namespaces=["default", "kube-system"],
        )
        pol.place_in(request("loner", 2000, labels={"team": "x"}, rules=loner), "numa0")
        # Into the loner's socket: kept out unless it is a daemon.
        near = request("agent-0", 1000, namespace="kube-system", labels={"team": "x"})
        # A daemon with the loner's rule, in socket 1: it keeps team x out of socket 1
        # unless it is a daemon.
        far = request("agent-1", 1000, namespace="kube-system", labels={"team": "x"}, rules=loner)
        pol.place_in(far, "numa2")
        web = request("web", 1000, labels={"team": "x"})
        if held:
            with pytest.raises(RuleUnsatisfied):
                pol.place_in(near, "numa1")
            with pytest.raises(RuleUnsatisfied):
                pol.place_in(web, "numa3")
        else:
            assert pol.place_in(near, "numa1").exclusive
            assert pol.place_in(web, "numa3").exclusive


NOBODY_HAS = {"matchExpressions": [{"key": "zz", "operator": "DoesNotExist"}]}
NOT_ZZ = {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["zz"]}]}


@pytest.mark.parametrize(
    ("selector", "level", "scope", "namespace", "listed", "refused"),
    [
        ({}, Level.SOCKET, {"all_namespaces": True}, "default", [], True),
        ({}, Level.NUMA, {"all_namespaces": True}, "default", [], True),
        ({}, Level.CORE, {"all_namespaces": True}, "default", [], True),
        (NOBODY_HAS, Level.HOST, {"all_namespaces": True}, "default", [], True),
        (NOT_ZZ, Level.SOCKET, {"all_namespaces": True}, "default", [], True),
        (NOT_ZZ, Level.SOCKET, {"namespaces": ["other"]}, "default", [], True),
        ({}, Level.SOCKET, {"all_namespaces": True}, "hpc", ["hpc"], False),
        # Within its own namespace a pod may block its own namespace, as in Kubernetes.
        (NOT_ZZ, Level.SOCKET, {"namespaces": ["default"]}, "default", [], False),
        ({}, Level.CORE, {}, "default", [], False),
    ],
)
def test_an_anti_affinity_reaching_other_namespaces_is_refused_in_every_form(
    machines: Machines,
    selector: dict[str, Any],
    level: Level,
    scope: dict[str, Any],
    namespace: str,
    listed: list[str],
    refused: bool,
) -> None:
    """No tenant can close the node: whatever the selector, a required anti-affinity
    whose namespaces reach beyond the pod's own is refused unless listed."""
    m = machines("xeon-2s-2numa")
    pol = policy(m, exclusive_domain_namespaces=listed)
    rules = affinity(anti_required=[term(selector, level, **scope)])
    req = request("alone", 2000, namespace=namespace, rules=rules)
    if refused:
        with pytest.raises(InvalidRequest) as err:
            pol.place(req)
        assert "podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]" in str(err.value)
        assert "exclusive_domain_namespaces" in str(err.value)
    else:
        assert pol.place(req).exclusive


def test_a_required_anti_affinity_at_core_is_only_for_exclusive_containers(
    machines: Machines,
) -> None:
    """A shared container occupies its whole pool: at core it would close a NUMA node."""
    m = machines("xeon-2s-2numa")
    pol = policy(m)
    rules = affinity(anti_required=[term({}, Level.CORE)])
    with pytest.raises(InvalidRequest) as err:
        pol.place(request("shared", 500, qos=B, rules=rules))
    assert "numa-agent.io/core is only for containers with exclusive CPUs" in str(err.value)
    assert pol.place(request("pinned", 2000, rules=rules)).exclusive


def test_dont_colocate_with_anything_except_my_service(machines: Machines) -> None:
    """The design's example via NotIn: web replicas share sockets with each other but
    with nothing else."""
    m = machines("xeon-2s-2numa")
    pol = policy(m, exclusive_domain_namespaces=["default"])
    pol.place_in(request("batch", 2000, labels={"app": "batch"}), "socket0")
    others = {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}
    rules = affinity(anti_required=[term(others, Level.SOCKET, all_namespaces=True)])
    webs = [
        pol.place(request(f"web-{n}", 2000, labels={"app": "web"}, rules=rules)) for n in range(3)
    ]
    assert {s for w in webs for s in touched(m, Level.SOCKET, w.cpus)} == {1}
    # And nothing else may join them (symmetry).
    with pytest.raises(RuleUnsatisfied):
        pol.place_in(request("intruder", 2000, labels={"app": "api"}), "socket1")


# -- combined with capacity and the other scores -----------------------------------------------


def test_required_rules_filter_before_capacity_ties(machines: Machines) -> None:
    m = machines("xeon-2s-2numa")
    pol = policy(m)
    pol.place_in(request("db-0", 2000, labels={"app": "db"}), "numa0")
    rules = affinity(anti_required=[term(DB, Level.NUMA)])
    # Best fit alone would choose numa0 (fewest free left); the rule says otherwise.
    assert pol.place(request("db-1", 2000, labels={"app": "db"}, rules=rules)).pool != "numa0"


def test_capacity_refusals_stay_resource_exhausted(machines: Machines) -> None:
    m = machines("xeon-2s-2numa")
    pol = policy(m)
    rules = affinity(anti_required=[term(DB, Level.SOCKET)])
    with pytest.raises(ResourceExhausted):
        pol.place(request("huge", 100_000, labels={"app": "db"}, rules=rules))


def test_refusal_names_the_rule_the_level_and_why(machines: Machines) -> None:
    m = machines("xeon-2s-2numa")
    pol = policy(m)
    rules = affinity(anti_required=[term(DB, Level.SOCKET)])
    for n in range(2):
        pol.place(request(f"db-{n}", 1000, labels={"app": "db"}, rules=rules))
    with pytest.raises(RuleUnsatisfied) as refused:
        pol.place(request("db-2", 1000, labels={"app": "db"}, rules=rules))
    text = str(refused.value)
    assert text.startswith("no place for 1 exclusive CPUs satisfies the pod rules: ")
    assert (
        "numa-agent.io/affinity: podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0] "
        "(required anti-affinity at numa-agent.io/socket): every socket already runs a pod "
        "matching app=db (default/db-0 on socket0; default/db-1 on socket1)"
    ) in text


def test_scores_add_up_and_explanations_show_each_rule(machines: Machines) -> None:
    m = machines("xeon-2s-2numa")
    pol = policy(m)
    pol.place_in(request("cache", 1000, labels={"app": "cache"}), "numa3")
    rules = affinity(preferred=[term({"matchLabels": {"app": "cache"}}, Level.NUMA, weight=40)])
    web = pol.place(request("web", 500, qos=B, labels={"app": "web"}, rules=rules))
    assert web.pool == "numa3" and web.score == 40
    assert "rules for numa3: +40 numa-agent.io/affinity: podAffinity.preferred" in web.explanation


def test_both_languages_add_up_on_one_scale_as_the_worked_example_says(
    machines: Machines,
) -> None:
    """docs/placement.md, "One scale": a cri-resource-manager affinity of weight 50
    (times closeness) and a preferred pod anti-affinity of weight 30 on one pod."""
    m = machines("xeon-2s-2numa")
    pol = policy(m)
    pol.place_in(request("cache", 2000, labels={"app": "cache"}), "numa0")
    pol.place_in(request("batch", 2000, labels={"app": "batch"}), "numa0")
    annotations = {
        "cri-resource-manager.intel.com/affinity": (
            "main:\n  - scope:\n      key: pod/name\n      operator: Equals\n"
            "      values: [cache]\n"
            "    match:\n      key: name\n      operator: Equals\n      values: [main]\n"
            "    weight: 50\n"
        )
    }
    rules = affinity(
        anti_preferred=[term({"matchLabels": {"app": "batch"}}, Level.NUMA, weight=30)]
    )
    base = request("web", 500, qos=B, labels={"app": "web"}, rules=rules)
    crm = parse_pod_affinities(annotations).rules_for("main")
    assert [r.signed for r in crm] == [50]
    web = pol.place(replace(base, terms=crm))
    close = closeness_to_numa0(pol)
    assert web.pool == "numa1"
    assert web.score == round(50 * close["numa1"], 9)
    assert f"{web.score:.3f}" == "48.864"
    text = web.explanation
    assert "rules for numa1: +48.864 cri-resource-manager affinities toward 1 placed" in text
    assert (
        "rules for numa0: +50.000 cri-resource-manager affinities toward 1 placed container, "
        "by closeness; -30 numa-agent.io/affinity: podAntiAffinity.preferred"
    ) in text
    assert "candidates: numa1 48.864 [load 2%], numa0 20.000" in text


def closeness_to_numa0(pol: Policy) -> dict[str, float]:
    """Closeness of every pool to numa0 (agent/policy/closeness.py, docs/placement.md)."""
    table = closeness_table(pol.machine, pol.tree)
    numa0 = pol.tree.by_name("numa0").index
    return {pool.name: table[pool.index][numa0] for pool in pol.tree.pools}
