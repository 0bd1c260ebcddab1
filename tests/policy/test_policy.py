"""Placement scenarios: shared pools shrinking and growing back, reserved CPUs, affinity and
anti-affinity, capacity compromises, release and reuse, refusals, keys and saved state."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from agent.affinity import (
    ANNOTATION_AFFINITY,
    Expression,
    Operator,
    crm_term,
    parse_pod_affinities,
)
from agent.policy.config import ConfigError, PolicyConfig
from agent.policy.errors import InvalidRequest, ResourceExhausted, UnknownContainer
from agent.policy.policy import CpusetUpdate, Policy
from agent.policy.request import PREFER_SHARED, ContainerRequest
from agent.terms.term import Term
from agent.workload import QoSClass
from tests.policy.helpers import policy, request
from topology.cpuset import CPUSet
from topology.tree import Machine

Machines = Callable[[str], Machine]
B = QoSClass.BURSTABLE
BE = QoSClass.BESTEFFORT


def named(name: str, weight: int) -> tuple[Term, ...]:
    """A cri-resource-manager rule: `weight` towards every container called `name`."""
    every = Expression("", Operator.ALWAYS_TRUE)
    match = Expression("name", Operator.EQUALS, (name,))
    return (crm_term(ANNOTATION_AFFINITY, match, every, weight),)


def now(pol: Policy, key: str) -> str:
    decision = pol.current(key)
    assert decision is not None, f"{key} is not placed"
    return str(decision.cpus)


def updates(items: tuple[CpusetUpdate, ...]) -> dict[str, str]:
    return {u.key: str(u.cpus) for u in items}


# -- shared pools -------------------------------------------------------------


def test_shared_pool_shrinks_and_grows_back(machines: Machines) -> None:
    pol = policy(machines("xeon-2s-2numa"))
    web = pol.place(request("web", 500, qos=B, limit=1000))
    sys = pol.place(request("dns", 100, qos=B, namespace="kube-system"))
    assert (web.pool, str(web.cpus), str(web.mems)) == ("numa0", "0-9,40-49", "0")
    assert (sys.pool, str(sys.cpus), str(sys.mems)) == ("reserved", "0-79", "0-3")
    # Ties on everything but load and id: numa0 (lowest id) takes the exclusive one too.
    db = pol.place(request("db", 4000))
    assert str(db.cpus) == "0-1,40-41"
    assert updates(db.updates) == {"web": "2-9,42-49", "dns": "2-39,42-79"}
    assert now(pol, "web") == "2-9,42-49"
    pol.check_invariants()
    # Back again when it goes.
    assert updates(pol.release("db")) == {"web": "0-9,40-49", "dns": "0-79"}
    assert pol.release("db") == ()
    pol.check_invariants()


def test_besteffort_spreads_by_load(machines: Machines) -> None:
    pol = policy(machines("xeon-2s-2numa"))
    pools = [pol.place(request(f"b{i}", 3000, qos=B, limit=0)).pool for i in range(4)]
    # Each goes to the least loaded node.
    assert pools == ["numa0", "numa1", "numa2", "numa3"]
    assert pol.place(request("e", 0, qos=BE)).pool == "numa0"


def test_shared_capacity_counts_ancestors(machines: Machines) -> None:
    pol = policy(machines("desktop-1s-4c-ht"))
    pol.place(request("a", 6000, qos=B, limit=0))
    with pytest.raises(ResourceExhausted, match=r"requested 3000m of shared CPU, at most 2000m"):
        pol.place(request("b", 3000, qos=B, limit=0))
    # An exclusive request may not eat the CPUs the shared containers are using.
    with pytest.raises(ResourceExhausted, match="would leave machine 5 shared CPUs for 6000m"):
        pol.place(request("x", 3000))
    assert pol.place(request("y", 2000)).exclusive
    pol.check_invariants()


def test_last_shared_cpu_is_kept(machines: Machines) -> None:
    pol = policy(machines("desktop-1s-4c-ht"))
    with pytest.raises(
        ResourceExhausted,
        match=r"^requested 8 exclusive CPUs, at most 8 free in any NUMA node; 8 free in total; "
        r"machine: would take the machine's last shared CPU \(one always stays shared\)$",
    ):
        pol.place(request("x", 8000))
    assert str(pol.place(request("x", 7000)).cpus) == "0-6"
    with pytest.raises(ResourceExhausted, match="requested 1 exclusive CPUs, at most 1 free"):
        pol.place(request("y", 1000))
    assert str(pol.place(request("s", 100, qos=B)).cpus) == "7"


# -- reserved CPUs ------------------------------------------------------------


def test_reserved_cpus(machines: Machines) -> None:
    pol = policy(machines("xeon-2s-2numa"), reserved_cpus="0,40")
    sys = pol.place(request("proxy", 2000, namespace="kube-system"))
    assert (sys.pool, str(sys.cpus), str(sys.mems), sys.exclusive) == (
        "reserved",
        "0,40",
        "0",
        False,
    )
    # numa0 lost two CPUs to the reserved set, so it is the more loaded node.
    web = pol.place(request("web", 500, qos=B))
    assert (web.pool, str(web.cpus)) == ("numa1", "10-19,50-59")
    # 18 exclusive CPUs fit numa0 exactly (best fit) without touching 0 and 40.
    exact = pol.place(request("exact", 18_000))
    assert (exact.pool, str(exact.cpus), exact.updates) == ("numa0", "1-9,41-49", ())
    # 19 of numa1's 20: nine whole cores and one thread; web keeps the last CPU.
    big = pol.place(request("big", 19_000))
    assert (big.pool, str(big.cpus)) == ("numa1", "10-19,50-58")
    assert updates(big.updates) == {"web": "59"}
    assert now(pol, "proxy") == "0,40"
    pol.check_invariants()


def test_reserved_cpus_must_be_online(machines: Machines) -> None:
    with pytest.raises(ConfigError, match="reserved_cpus: CPUs 200 are not online"):
        policy(machines("xeon-2s-2numa"), reserved_cpus="0,200")


# -- affinity -----------------------------------------------------------------


def test_affinity_pulls_next_to_partner(machines: Machines) -> None:
    pol = policy(machines("xeon-2s-2numa"))
    pol.place_in(request("db", 1000, qos=B), "numa3")
    # Without affinity an exclusive container takes the lowest node (all fit alike).
    assert pol.place(request("other", 2000)).pool == "numa0"
    app = pol.place(request("app", 2000, terms=named("db", 10)))
    assert (app.pool, app.score) == ("numa3", 10.0)
    assert "higher affinity score" in app.explanation
    # A shared container is pulled the same way, against the load rule.
    cache = pol.place(request("cache", 500, qos=B, terms=named("app", 3)))
    assert cache.pool == "numa3"
    pol.check_invariants()


@pytest.mark.parametrize(
    ("shape", "replicas", "nodes_differ", "sockets_first"),
    [
        ("xeon-2s-2numa", 4, True, 2),
        ("server-4s", 4, True, 4),
        ("dies-2-per-socket", 4, True, 2),
        ("epyc-2s-nps4", 8, True, 2),
    ],
)
def test_anti_affinity_spreads_replicas(
    machines: Machines, shape: str, replicas: int, nodes_differ: bool, sockets_first: int
) -> None:
    machine = machines(shape)
    pol = policy(machine)
    socket_of = {n.id: s.id for s in machine.sockets for n in s.numa_nodes}
    placed = []
    for i in range(replicas):
        decision = pol.place(
            request(f"web-{i}", 2000, pod=f"web-{i}", name="web", terms=named("web", -5))
        )
        (node,) = decision.mems.ids()
        placed.append(node)
    assert len(set(placed)) == replicas
    # The first replicas go to different sockets before any socket gets a second one.
    assert len({socket_of[n] for n in placed[:sockets_first]}) == sockets_first
    pol.check_invariants()


def test_capacity_forces_a_compromise(machines: Machines) -> None:
    pol = policy(machines("xeon-2s-2numa"))
    pol.place_in(request("big", 18_000), "numa3")
    partner = pol.place(request("partner", 4000, terms=named("big", 10)))
    # numa3 has 2 CPUs left: the closest node with room, on the same socket. (socket1
    # is a candidate too, but its CPUs would come from numa2 as well: same score.)
    assert (partner.pool, str(partner.mems)) == ("numa2", "2")
    assert "numa3: 2 free exclusive CPUs" in partner.explanation
    pol.check_invariants()


def test_colocate_pods(machines: Machines) -> None:
    machine = machines("xeon-2s-2numa")
    for colocate, expected in ((False, "numa0"), (True, "numa3")):
        pol = policy(machine, colocate_pods=colocate)
        pol.place_in(request("a", 1000, qos=B, pod="p", name="a"), "numa3")
        assert pol.place(request("b", 100, qos=B, pod="p", name="b")).pool == expected


def test_real_affinity_annotations(machines: Machines) -> None:
    """The pod's own annotation, parsed by agent.affinity, drives the same pull."""
    pol = policy(machines("xeon-2s-2numa"))
    annotations = {"cri-resource-manager.intel.com/affinity": "app: [cache]"}
    affinities = parse_pod_affinities(annotations)

    def make(name: str, milli: int, qos: QoSClass) -> ContainerRequest:
        base = request(
            f"web/{name}",
            milli,
            qos=qos,
            pod="web",
            name=name,
            annotations=annotations,
            limit=milli if qos is QoSClass.GUARANTEED else 2 * milli,
        )
        rules = affinities.rules_for(name)
        return ContainerRequest(base.key, base.container, base.resources, rules)

    pol.place_in(make("cache", 500, QoSClass.BURSTABLE), "numa2")
    app = pol.place(make("app", 2000, QoSClass.GUARANTEED))
    assert app.pool == "numa2" and app.score > 0


# -- release, reuse, keys -----------------------------------------------------


def test_init_container_cpus_go_to_the_app(machines: Machines) -> None:
    pol = policy(machines("desktop-1s-4c-ht"))
    init = pol.place(request("pod/init", 6000, pod="pod", name="init"))
    with pytest.raises(ResourceExhausted):
        pol.place(request("pod/app", 6000, pod="pod", name="app"))
    pol.release("pod/init")  # it exited
    app = pol.place(request("pod/app", 6000, pod="pod", name="app"))
    assert app.cpus == init.cpus
    pol.check_invariants()


def test_release_pod_releases_all_its_containers(machines: Machines) -> None:
    pol = policy(machines("xeon-2s-2numa"))
    pol.place(request("p/a", 2000, pod="p", name="a"))
    pol.place(request("p/b", 500, qos=B, pod="p", name="b"))
    other = pol.place(request("q/c", 500, qos=B, pod="q", name="c"))
    ups = pol.release_pod("uid-p")
    assert set(pol.assignments()) == {"q/c"}
    # q/c shared numa1 ... it was not affected by p/a's CPUs in numa0.
    assert ups == () and now(pol, "q/c") == str(other.cpus)
    pol.check_invariants()


def test_rekey(machines: Machines) -> None:
    pol = policy(machines("xeon-2s-2numa"))
    pol.place(request("sandbox/web/0", 500, qos=B))
    pol.rekey("sandbox/web/0", "c0ffee")
    assert pol.current("sandbox/web/0") is None
    assert pol.current("c0ffee") is not None
    assert updates(pol.place(request("x", 2000)).updates) == {"c0ffee": "1-9,41-49"}
    assert pol.release("c0ffee") == ()
    with pytest.raises(UnknownContainer, match="no such container"):
        pol.rekey("gone", "x2")
    pol.check_invariants()


def test_resize_moves_between_shared_and_exclusive(machines: Machines) -> None:
    pol = policy(machines("xeon-2s-2numa"))
    pol.place(request("other", 100, qos=B))
    first = pol.place(request("c", 1500))
    assert not first.exclusive
    second = pol.resize(request("c", 2000))
    assert second.exclusive and str(second.cpus) == "0,40"
    assert updates(second.updates) == {"other": "1-9,41-49"}
    # Too big: refused and left where it was.
    with pytest.raises(ResourceExhausted):
        pol.resize(request("c", 100_000))
    assert pol.current("c") == pol.assignments()["c"]
    assert now(pol, "c") == "0,40"
    pol.check_invariants()


# -- refusals -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "before", "milli", "qos", "message"),
    [
        (
            "xeon-2s-2numa",
            (16, 16, 16, 16),
            17_000,
            QoSClass.GUARANTEED,
            r"^requested 17 exclusive CPUs, at most 4 free in any NUMA node; 16 free in total; "
            r"machine: 16 free exclusive CPUs$",
        ),
        (
            "desktop-1s-4c-ht",
            (),
            9000,
            QoSClass.GUARANTEED,
            r"^requested 9 exclusive CPUs, at most 8 free in any NUMA node; 8 free in total; "
            r"machine: 8 free exclusive CPUs$",
        ),
        (
            "xeon-2s-2numa",
            (),
            100_000,
            B,
            r"^requested 100000m of shared CPU, at most 80000m free in any pool; "
            r"machine: 80000m shared CPU free$",
        ),
    ],
)
def test_refusals(
    machines: Machines,
    shape: str,
    before: tuple[int, ...],
    milli: int,
    qos: QoSClass,
    message: str,
) -> None:
    pol = policy(machines(shape))
    for i, n in enumerate(before):
        pol.place(request(f"b{i}", n * 1000))
    with pytest.raises(ResourceExhausted, match=message):
        pol.place(request("new", milli, qos=qos, limit=milli if qos is QoSClass.GUARANTEED else 0))
    pol.check_invariants()


def test_memory_refusal(machines: Machines) -> None:
    pol = policy(machines("xeon-2s-2numa"))  # 96 GiB per node
    gib = 1 << 30
    assert pol.place(request("a", 500, memory=90 * gib)).pool == "numa0"
    assert pol.place(request("b", 500, memory=90 * gib)).pool == "numa1"
    big = pol.place(request("c", 500, memory=150 * gib))
    assert big.pool == "socket1"
    with pytest.raises(ResourceExhausted, match="bytes of memory"):
        pol.place(request("d", 500, memory=300 * gib))


def test_invalid_annotation_refused(machines: Machines) -> None:
    pol = policy(machines("xeon-2s-2numa"))
    bad = {f"{PREFER_SHARED}/pod": "maybe"}
    with pytest.raises(InvalidRequest, match="prefer-shared-cpus"):
        pol.place(request("x", 2000, annotations=bad))


def test_pinning_off(machines: Machines) -> None:
    pol = policy(machines("xeon-2s-2numa"), pin_cpus=False, pin_memory=False)
    pol.place(request("web", 500, qos=B))
    db = pol.place(request("db", 4000))
    assert (str(db.cpus), str(db.mems), db.exclusive, db.updates) == ("", "", True, ())


# -- adopt and saved state ----------------------------------------------------


def test_adopt_keeps_running_exclusive_cpus(machines: Machines) -> None:
    pol = policy(machines("xeon-2s-2numa"))
    web = pol.adopt(request("web", 500, qos=B), CPUSet.parse("10-19,50-59"), CPUSet.parse("1"))
    assert web.pool == "numa1"
    db = pol.adopt(request("db", 2000), CPUSet.parse("12,52"), CPUSet.parse("1"))
    assert (db.pool, str(db.cpus), db.exclusive) == ("numa1", "12,52", True)
    assert updates(db.updates) == {"web": "10-11,13-19,50-51,53-59"}
    # A count that does not match the request: shared, not exclusive.
    odd = pol.adopt(request("odd", 2000), CPUSet.parse("30"), CPUSet())
    assert not odd.exclusive and odd.pool == "numa3"
    assert not pol.place(request("new", 2000)).cpus & CPUSet.parse("12,52")
    pol.check_invariants()


def test_restore_takes_records_back_as_they_were(machines: Machines) -> None:
    machine = machines("epyc-2s-nps4")
    config = PolicyConfig(reserved_cpus=CPUSet.parse("0,128"))
    pol = Policy(machine, config)
    reqs = [
        request("a", 4000),
        request("b", 500, qos=B),
        request("c", 20_000),
        request("d", 100, namespace="kube-system"),
        request("e", 1000, qos=B, terms=named("c", 5)),
    ]
    for req in reqs:
        pol.place(req)
    saved = {key: record.saved() for key, record in pol.records().items()}
    restored = Policy(machine, config)
    for req in reversed(reqs):  # order does not matter
        assert restored.restore(req, saved[req.key]) is not None
    assert restored.records() == pol.records()
    restored.check_invariants()
    # The restored policy goes on the same way as the original.
    assert pol.place(request("f", 2000)).cpus == restored.place(request("f", 2000)).cpus


def test_restore_refuses_what_is_no_longer_valid(machines: Machines) -> None:
    machine = machines("xeon-2s-2numa")
    pol = policy(machine)
    db = pol.place(request("db", 4000))
    web = pol.place(request("web", 500, qos=B))
    saved = {key: record.saved() for key, record in pol.records().items()}
    # The exclusive CPUs are now reserved; the shared pool no longer exists by that name.
    other = policy(machine, reserved_cpus=str(db.cpus))
    assert other.restore(request("db", 4000), saved["db"]) is None
    gone = replace(saved["web"], pool="numa9")
    assert other.restore(request("web", 500, qos=B), gone) is None
    # Asked for more CPUs than it holds: not the same container any more.
    assert other.restore(request("db", 6000), saved["db"]) is None
    assert not other.records()
    assert other.restore(request("web", 500, qos=B), saved["web"]) is not None
    assert other.records()["web"].pool_name == web.pool


def test_explanation_names_the_deciding_rule(machines: Machines) -> None:
    pol = policy(machines("xeon-2s-2numa"))
    pol.place_in(request("a", 4000), "numa2")
    # Best fit: numa2 has 16 free, the others 20.
    text = pol.place(request("b", 2000)).explanation
    assert "-> numa2" in text and "less fragmentation (best fit) than numa0" in text
    assert "candidates: numa2 0.000 [splits 0 cores, leaves 14 free]" in text
    shared = pol.place(request("s", 500, qos=B)).explanation
    assert "-> numa0" in shared and "less loaded pool than numa1" not in shared
    assert "lower pool id than numa1" in shared


# -- symmetric evaluation -----------------------------------------------------


@pytest.mark.parametrize(("symmetric", "expected"), [(False, "numa0"), (True, "numa3")])
def test_symmetric_affinity_pulls_a_later_partner(
    machines: Machines, symmetric: bool, expected: str
) -> None:
    # web wants cache but is placed first (in numa3); cache has no rules of its own.
    pol = policy(machines("xeon-2s-2numa"), symmetric_affinity=symmetric)
    pol.place_in(request("web", 2000, name="web", terms=named("cache", 10)), "numa3")
    # A shared cache: without a pull it goes to the least loaded, lowest pool.
    cache = pol.place(request("cache", 500, qos=B, name="cache"))
    # Off: cri-resource-manager's behaviour, web's rule acted only when web was placed.
    assert cache.pool == expected
    pol.check_invariants()


def test_symmetric_affinity_adds_both_directions(machines: Machines) -> None:
    # A push from the placed container outweighs the newcomer's own pull.
    pol = policy(machines("xeon-2s-2numa"), symmetric_affinity=True)
    pol.place_in(request("a", 2000, name="a", terms=named("b", -5)), "numa1")
    b = pol.place(request("b", 500, qos=B, name="b", terms=named("a", 2)))
    assert b.pool != "numa1" and "numa" in b.pool
    off = policy(machines("xeon-2s-2numa"))
    off.place_in(request("a", 2000, name="a", terms=named("b", -5)), "numa1")
    assert off.place(request("b", 500, qos=B, name="b", terms=named("a", 2))).pool == "numa1"


def test_explanations_note_each_closeness_weighted_source_in_weight_points(
    machines: Machines,
) -> None:
    pol = policy(machines("xeon-2s-2numa"), symmetric_affinity=True, colocate_pods=True)
    pol.place_in(request("a", 2000, pod="p", name="a", terms=named("b", 5)), "numa1")
    b = pol.place(request("b", 500, qos=B, pod="p", name="b", terms=named("a", 2)))
    assert b.pool == "numa1" and b.score == 8
    assert (
        "rules for numa1: +2.000 cri-resource-manager affinities toward 1 placed container, "
        "by closeness; +5.000 cri-resource-manager affinities of 1 placed container toward it, "
        "by closeness; +1.000 colocate_pods: 1 container of its pod, by closeness"
    ) in b.explanation
