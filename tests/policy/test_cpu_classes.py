"""Kinds of core and memory tiers on placement: numa-agent.io/cpu-class and
numa-agent.io/memory-tiers, as tables over the hybrid shapes and a non-hybrid one."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from agent.node.requests import request_for, running_request
from agent.policy.config import PolicyConfig
from agent.policy.policy import Decision, InvalidRequest, Policy, ResourceExhausted
from agent.policy.request import ContainerRequest
from agent.workload import QoSClass
from tests.policy.helpers import request
from topology.cpuset import CPUSet
from topology.shapes import shape_machine

CLASS = "numa-agent.io/cpu-class"
TIERS = "numa-agent.io/memory-tiers"


def ask(
    key: str,
    milli: int,
    annotations: Mapping[str, str] | None = None,
    *,
    name: str | None = None,
    qos: QoSClass = QoSClass.GUARANTEED,
) -> ContainerRequest:
    """A request as the agent builds it at create time (annotations parsed, strictly)."""
    plain = request(key, milli, annotations=annotations, name=name, qos=qos)
    return request_for(key, plain.container, plain.resources, ())


def policy(shape: str) -> Policy:
    return Policy(shape_machine(shape), PolicyConfig())


# (shape, annotations, container name, milliCPU, QoS, expected cpuset)
PLACED: list[tuple[str, dict[str, str], str, int, QoSClass, str]] = [
    # hybrid-desktop: P-cores 0-15 (two threads each), E-cores 16-23.
    ("hybrid-desktop", {}, "app", 2000, QoSClass.GUARANTEED, "0-1"),
    # One CPU: a thread of a P-core, not the lone E-core (a whole core, but the slow kind).
    ("hybrid-desktop", {}, "app", 1000, QoSClass.GUARANTEED, "0"),
    ("hybrid-desktop", {CLASS: "performance"}, "app", 1000, QoSClass.GUARANTEED, "0"),
    ("hybrid-desktop", {CLASS: "efficiency"}, "app", 2000, QoSClass.GUARANTEED, "16-17"),
    # any: no preference, so the whole-core rule picks a single-thread E-core.
    ("hybrid-desktop", {CLASS: "any"}, "app", 1000, QoSClass.GUARANTEED, "16"),
    # A mapping: each container its own class; one it does not name keeps the default.
    (
        "hybrid-desktop",
        {CLASS: "{app: efficiency, db: any}"},
        "app",
        2000,
        QoSClass.GUARANTEED,
        "16-17",
    ),
    ("hybrid-desktop", {CLASS: "{app: efficiency}"}, "side", 2000, QoSClass.GUARANTEED, "0-1"),
    (
        "hybrid-desktop",
        {CLASS: "app: efficiency\nside: performance"},
        "side",
        2000,
        QoSClass.GUARANTEED,
        "0-1",
    ),
    # Shared containers: the shared part of the class's cores; no class: every shared CPU.
    ("hybrid-desktop", {CLASS: "efficiency"}, "app", 500, QoSClass.BURSTABLE, "16-23"),
    ("hybrid-desktop", {CLASS: "performance"}, "app", 500, QoSClass.BURSTABLE, "0-15"),
    ("hybrid-desktop", {}, "app", 500, QoSClass.BURSTABLE, "0-23"),
    # arm-big-little: big cores 0-3, LITTLE 4-7, one thread each.
    ("arm-big-little", {}, "app", 2000, QoSClass.GUARANTEED, "0-1"),
    ("arm-big-little", {CLASS: "efficiency"}, "app", 2000, QoSClass.GUARANTEED, "4-5"),
    ("arm-big-little", {CLASS: "efficiency"}, "app", 300, QoSClass.BESTEFFORT, "4-7"),
    # desktop-favoured (one kind of core): performance and any change nothing.
    ("desktop-favoured", {}, "app", 2000, QoSClass.GUARANTEED, "0,10"),
    ("desktop-favoured", {CLASS: "performance"}, "app", 2000, QoSClass.GUARANTEED, "0,10"),
    ("desktop-favoured", {CLASS: "any"}, "app", 2000, QoSClass.GUARANTEED, "0,10"),
    ("desktop-favoured", {CLASS: "performance"}, "app", 500, QoSClass.BURSTABLE, "0-19"),
]


@pytest.mark.parametrize(("shape", "annotations", "name", "milli", "qos", "cpus"), PLACED)
def test_cpu_class_places(
    shape: str, annotations: dict[str, str], name: str, milli: int, qos: QoSClass, cpus: str
) -> None:
    pol = policy(shape)
    decision = pol.place(ask("c", milli, annotations, name=name, qos=qos))
    assert str(decision.cpus) == cpus
    pol.check_invariants()


# (shape, annotations, container, what the refusal says)
INVALID: list[tuple[str, dict[str, str], str, str]] = [
    (
        "desktop-favoured",
        {CLASS: "efficiency"},
        "app",
        "annotation numa-agent.io/cpu-class asks efficiency cores for container 'app' "
        "of pod default/c, but this machine has one kind of core",
    ),
    (
        "hybrid-desktop",
        {CLASS: "fast"},
        "app",
        "annotation numa-agent.io/cpu-class on container 'app': 'fast' is not one of "
        "performance, efficiency, any",
    ),
    (
        "hybrid-desktop",
        {CLASS: "{app: efficiency, app: any}"},
        "app",
        "container 'app' is named twice",
    ),
    (
        "hybrid-desktop",
        {TIERS: "{app: hbm}"},
        "app",
        "annotation numa-agent.io/memory-tiers on container 'app': container 'app': 'hbm' "
        "is not one of dram+far, dram",
    ),
    ("hybrid-desktop", {CLASS: "{app: efficiency"}, "app", "never closes it"),
]


@pytest.mark.parametrize(("shape", "annotations", "name", "says"), INVALID)
def test_refused_as_invalid(shape: str, annotations: dict[str, str], name: str, says: str) -> None:
    pol = policy(shape)
    with pytest.raises(InvalidRequest) as err:
        pol.place(ask("c", 2000, annotations, name=name))
    assert says in str(err.value)
    assert pol.records() == {}


def fill(pol: Policy, count: int, annotations: Mapping[str, str] | None = None) -> Decision:
    return pol.place(ask(f"fill{count}", count * 1000, annotations))


def test_the_default_falls_back_to_efficiency_cores_when_performance_ones_are_taken() -> None:
    pol = policy("hybrid-desktop")
    assert str(fill(pol, 16).cpus) == "0-15"  # every P-core
    fallback = pol.place(ask("late", 2000))
    assert str(fallback.cpus) == "16-17"
    assert "off its preferred kind of core" in fallback.explanation
    with pytest.raises(ResourceExhausted) as err:
        pol.place(ask("strict", 2000, {CLASS: "performance"}))
    assert "requested 2 exclusive performance CPUs" in str(err.value)
    assert "0 free in total" in str(err.value)
    pol.check_invariants()


def test_no_room_in_the_class_is_resource_exhausted() -> None:
    pol = policy("hybrid-desktop")
    with pytest.raises(ResourceExhausted, match="requested 9 exclusive efficiency CPUs"):
        pol.place(ask("big", 9000, {CLASS: "efficiency"}))
    # Shared: 8 E-cores hold 8000m, whatever the rest of the machine has.
    with pytest.raises(ResourceExhausted, match="8000m shared efficiency CPU free"):
        pol.place(ask("wide", 9000, {CLASS: "efficiency"}, qos=QoSClass.BURSTABLE))
    pol.place(ask("s1", 6000, {CLASS: "efficiency"}, qos=QoSClass.BURSTABLE))
    with pytest.raises(ResourceExhausted, match="2000m shared efficiency CPU free"):
        pol.place(ask("s2", 3000, {CLASS: "efficiency"}, qos=QoSClass.BURSTABLE))
    pol.check_invariants()


def test_a_shared_container_keeps_a_cpu_of_its_class() -> None:
    pol = policy("hybrid-desktop")
    shared = pol.place(ask("s", 500, {CLASS: "efficiency"}, qos=QoSClass.BESTEFFORT))
    assert str(shared.cpus) == "16-23"
    taken = pol.place(ask("e", 7000, {CLASS: "efficiency"}))
    assert str(taken.cpus) == "16-22"
    assert [(u.key, str(u.cpus)) for u in taken.updates] == [("s", "23")]
    with pytest.raises(ResourceExhausted, match="no shared efficiency CPU"):
        pol.place(ask("last", 1000, {CLASS: "efficiency"}))
    pol.check_invariants()
    # The default exclusive container still gets performance cores.
    assert str(pol.place(ask("p", 2000)).cpus) == "0-1"


# -- memory tiers -------------------------------------------------------------------------

FAR_NODES = CPUSet.parse("2-3")  # cxl-memory-only: CPU-less nodes 2 (near 0) and 3 (near 1)


@pytest.mark.parametrize(
    ("annotations", "name", "qos", "far"),
    [
        ({}, "app", QoSClass.GUARANTEED, True),
        ({TIERS: "dram+far"}, "app", QoSClass.GUARANTEED, True),
        ({TIERS: "dram"}, "app", QoSClass.GUARANTEED, False),
        ({TIERS: "{app: dram}"}, "app", QoSClass.GUARANTEED, False),
        ({TIERS: "{app: dram}"}, "side", QoSClass.GUARANTEED, True),
        ({}, "app", QoSClass.BURSTABLE, True),
        ({TIERS: "dram"}, "app", QoSClass.BURSTABLE, False),
    ],
)
def test_memory_tiers(annotations: dict[str, str], name: str, qos: QoSClass, far: bool) -> None:
    pol = policy("cxl-memory-only")
    decision = pol.place(ask("c", 2000, annotations, name=name, qos=qos))
    cpu_nodes = {n.id for n in pol.machine.iter_numa_nodes() if n.cpus.mask & decision.cpus.mask}
    mems = set(decision.mems)
    assert cpu_nodes <= mems  # always the memory of its CPUs' nodes
    if far:  # plus the memory-only node closest to each of them
        assert mems - cpu_nodes == {
            m.id for m in pol.machine.memory_only_nodes if m.closest_cpu_node in cpu_nodes
        }
        assert mems & set(FAR_NODES)
    else:
        assert mems == cpu_nodes
    pol.check_invariants()


def test_a_running_container_with_a_bad_annotation_is_still_taken_back() -> None:
    # Lenient for containers that already run (a restart must not fail over them).
    plain = request("c", 2000, annotations={CLASS: "fast"})
    creq = running_request("c", plain.container, plain.resources)
    assert creq.invalid is None and creq.cpu_class is None
    assert str(policy("hybrid-desktop").place(creq).cpus) == "0-1"
