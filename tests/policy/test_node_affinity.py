"""Node affinity over NUMA nodes (numa-agent.io/affinity's nodeAffinity): every operator
and rule, over several machine shapes, with the labels the machine gives each NUMA
node (agent.labels.numa) and the operator's own (numa_labels).

Expected nodes are worked out from the Machine and its labels, never copied from the
policy's output.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from agent.labels.numa import numa_node_labels
from agent.policy.config import PolicyConfig
from agent.policy.errors import RuleUnsatisfied
from agent.policy.policy import Decision, Policy
from agent.rules import Level
from tests.policy.test_pod_rules import B, G, request, touched
from topology.tree import Machine

Machines = Callable[[str], Machine]
SHAPES = ("xeon-2s-2numa", "epyc-2s-nps4", "dies-2-per-socket", "server-4s")
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


def required(*terms: list[dict[str, Any]]) -> str:
    return json.dumps(
        {
            "nodeAffinity": {
                REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": t} for t in terms]}
            }
        }
    )


def preferred(*weighted: tuple[int, list[dict[str, Any]]]) -> str:
    return json.dumps(
        {
            "nodeAffinity": {
                PREFERRED: [
                    {"weight": w, "preference": {"matchExpressions": t}} for w, t in weighted
                ]
            }
        }
    )


def nodes(machine: Machine) -> list[int]:
    return [n.id for n in machine.iter_numa_nodes()]


def node_ids(machine: Machine, d: Decision) -> set[int]:
    ids = nodes(machine)
    return {ids[i] for i in touched(machine, Level.NUMA, d.cpus)}


def labels_of(machine: Machine, config: PolicyConfig) -> Mapping[int, Mapping[str, str]]:
    return numa_node_labels(machine, config.numa_labels)


def policy(machine: Machine, **config: object) -> Policy:
    return Policy(machine, PolicyConfig.from_mapping(config))


def place_all(
    pol: Policy, rules: str, count: int, qos: Any = G, milli: int = 1000
) -> list[Decision]:
    return [pol.place(request(f"p{n}", milli, qos=qos, rules=rules)) for n in range(count)]


def operator_cases(machine: Machine) -> list[tuple[str, list[dict[str, Any]], set[int]]]:
    """(name, expressions, the NUMA nodes they allow), from the machine's labels."""
    ids = nodes(machine)
    labels = labels_of(machine, PolicyConfig())
    last = ids[-1]
    nic = machine.nics[-1]
    nic_key = f"numa-agent.io/net.{nic.name}"
    socket_of = {n: labels[n]["numa-agent.io/socket"] for n in ids}
    return [
        ("In", [expr("numa-agent.io/numa", "In", str(last))], {last}),
        (
            "NotIn",
            [expr("numa-agent.io/socket", "NotIn", socket_of[ids[0]])],
            {n for n in ids if socket_of[n] != socket_of[ids[0]]},
        ),
        ("Exists", [expr(nic_key, "Exists")], {n for n in ids if nic_key in labels[n]}),
        (
            "DoesNotExist",
            [expr(nic_key, "DoesNotExist")],
            {n for n in ids if nic_key not in labels[n]},
        ),
        ("Gt", [expr("numa-agent.io/numa", "Gt", str(ids[-2]))], {n for n in ids if n > ids[-2]}),
        ("Lt", [expr("numa-agent.io/numa", "Lt", str(ids[1]))], {n for n in ids if n < ids[1]}),
        (
            "ANDed",
            [
                expr("numa-agent.io/socket", "In", socket_of[last]),
                expr("numa-agent.io/numa", "NotIn", str(last)),
            ],
            {n for n in ids if socket_of[n] == socket_of[last] and n != last},
        ),
    ]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("qos", [G, B])
def test_every_operator_allows_exactly_its_numa_nodes(
    machines: Machines, shape: str, qos: Any
) -> None:
    m = machines(shape)
    for name, expressions, allowed in operator_cases(m):
        pol = policy(m)
        if not allowed:  # e.g. a socket with one node minus that node: refused
            with pytest.raises(RuleUnsatisfied):
                pol.place(request("p", 1000, qos=qos, rules=required(expressions)))
            continue
        used: set[int] = set()
        for d in place_all(
            pol, required(expressions), 2 * len(allowed), qos=qos, milli=1000 if qos is G else 300
        ):
            used |= node_ids(m, d)
        assert used and used <= allowed, (name, used, allowed)


@pytest.mark.parametrize("shape", SHAPES)
def test_required_terms_are_ored(machines: Machines, shape: str) -> None:
    m = machines(shape)
    ids = nodes(m)
    rules = required(
        [expr("numa-agent.io/numa", "In", str(ids[0]))],
        [expr("numa-agent.io/numa", "In", str(ids[-1]))],
    )
    pol = policy(m)
    used = set().union(*(node_ids(m, d) for d in place_all(pol, rules, 6)))
    assert used <= {ids[0], ids[-1]}


def test_a_shared_pool_is_allowed_only_if_all_its_nodes_are(machines: Machines) -> None:
    """Socket 0 of xeon-2s-2numa is NUMA nodes 0 and 1 (20 CPUs each): a shared
    container of 25 CPUs allowed on both goes to socket0; allowed on node 0 only, it
    has no pool (socket0 spans node 1) and is refused, naming node 1's lack."""
    m = machines("xeon-2s-2numa")
    both = required([expr("numa-agent.io/numa", "In", "0", "1")])
    assert policy(m).place(request("a", 25_000, qos=B, rules=both)).pool == "socket0"
    only = required([expr("numa-agent.io/numa", "In", "0")])
    with pytest.raises(RuleUnsatisfied) as refused:
        policy(m).place(request("b", 25_000, qos=B, rules=only))
    text = str(refused.value)
    assert "NUMA nodes it allows have no room" in text
    assert "numa1 fails" in text and "numa-agent.io/numa in (0)" in text


@pytest.mark.parametrize("shape", SHAPES)
def test_operator_labels_select_numa_nodes(machines: Machines, shape: str) -> None:
    """numa_labels from the configuration: a pod for NVMe goes to the node next to the
    drives; a batch job stays off the node the operator tuned for the database."""
    m = machines(shape)
    ids = nodes(m)
    config = {
        "numa_labels": {
            str(ids[-1]): {"example.com/storage": "nvme"},
            str(ids[0]): {"example.com/tuned": "db"},
        }
    }
    pol = policy(m, **config)
    nvme = pol.place(
        request("io", 1000, rules=required([expr("example.com/storage", "In", "nvme")]))
    )
    assert node_ids(m, nvme) == {ids[-1]}
    away = required([expr("example.com/tuned", "DoesNotExist")])
    used = set().union(*(node_ids(m, d) for d in place_all(pol, away, 2 * len(ids))))
    assert ids[0] not in used


def test_gt_and_lt_never_hold_for_a_label_that_is_not_an_integer(machines: Machines) -> None:
    m = machines("xeon-2s-2numa")
    pol = policy(m, numa_labels={"0": {"example.com/size": "big"}, "1": {"example.com/size": "7"}})
    got = pol.place(request("x", 1000, rules=required([expr("example.com/size", "Gt", "3")])))
    assert node_ids(m, got) == {1}
    with pytest.raises(RuleUnsatisfied) as refused:
        pol.place(request("y", 1000, rules=required([expr("example.com/size", "Lt", "3")])))
    text = str(refused.value)
    assert "no NUMA node has the labels it requires" in text
    path = "nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
    assert f"numa0 fails {path}: example.com/size<3" in text


def test_refusal_names_the_nodes_and_what_each_lacks(machines: Machines) -> None:
    m = machines("server-4s")
    pol = policy(m)
    rules = required(
        [expr("numa-agent.io/net.eth9", "Exists")], [expr("example.com/storage", "In", "nvme")]
    )
    with pytest.raises(RuleUnsatisfied) as refused:
        pol.place(request("p", 1000, rules=rules))
    text = str(refused.value)
    assert text.startswith("no place for 1 exclusive CPUs satisfies the pod rules: ")
    assert "numa-agent.io/affinity: nodeAffinity.requiredDuringScheduling" in text
    for node in nodes(m):
        assert f"numa{node} fails " in text
    assert "numa-agent.io/net.eth9" in text and "example.com/storage in (nvme)" in text


@pytest.mark.parametrize("shape", SHAPES)
def test_preferred_terms_add_their_weight_and_yield_under_pressure(
    machines: Machines, shape: str
) -> None:
    m = machines(shape)
    ids = nodes(m)
    last = m.numa_node(ids[-1])
    rules = preferred((20, [expr("numa-agent.io/numa", "In", str(ids[-1]))]))
    pol = policy(m)
    first = pol.place(request("a", 2000, rules=rules))
    assert node_ids(m, first) == {ids[-1]} and first.score == 20
    # Fill the preferred node: the preference yields, the container goes elsewhere.
    home = pol.tree.smallest_containing(last.cpus).name
    pol.place_in(request("filler", (len(last.cpus) - 2) * 1000), home)
    other = pol.place(request("b", 2000, rules=rules))
    assert ids[-1] not in node_ids(m, other) and other.score == 0


def test_preferred_weights_compete(machines: Machines) -> None:
    m = machines("epyc-2s-nps4")
    ids = nodes(m)
    rules = preferred(
        (20, [expr("numa-agent.io/numa", "In", str(ids[1]))]),
        (60, [expr("numa-agent.io/socket", "In", "1")]),
        (30, [expr("numa-agent.io/numa", "In", str(ids[-1]))]),
    )
    pol = policy(m)
    d = pol.place(request("a", 2000, rules=rules))
    assert node_ids(m, d) == {ids[-1]} and d.score == 90
