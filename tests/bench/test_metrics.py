"""The quality metrics the README quotes, on hand-built placements checked by reasoning."""

from __future__ import annotations

import pytest

from benchmarks.metrics import (
    Placed,
    affinity_objective,
    attainment,
    fewest_nodes,
    hard_faults,
    numa_aligned,
    set_closeness,
    whole_cores,
)
from benchmarks.quality import load_machine
from benchmarks.scenarios import SMALL
from topology.cpuset import CPUSet

# SMALL: 2 sockets x 2 nodes x 4 cores x 2 threads, interleaved numbering:
# node n holds cores 4n..4n+3, core k = CPUs {k, k + 16}; node 0 = 0-3,16-19.
P = CPUSet.parse


@pytest.fixture(scope="module")
def small():  # type: ignore[no-untyped-def]
    return load_machine(SMALL)


@pytest.mark.parametrize(
    ("placed", "reserved", "faults"),
    [
        ([Placed("a", P("0-1"), True), Placed("b", P("2-15"), False)], "", 0),
        ([Placed("a", P("0-1"), True), Placed("b", P("1-2"), True)], "", 1),  # CPU 1 twice
        ([Placed("a", P("0-3"), True), Placed("b", P("2-5"), True)], "", 2),  # CPUs 2 and 3
        ([Placed("a", P("0-1"), True), Placed("s", P("1-9"), False)], "", 1),  # exclusive in shared
        ([Placed("s", P("0-9"), False)], "0", 1),  # reserved CPU in a shared set
        ([Placed("s", P("0-9"), False, reserved=True)], "0", 0),  # kube-system may use it
        ([Placed("a", P("0-1"), True)], "1", 1),  # reserved CPU handed out exclusively
        ([Placed("a", P("40"), True)], "", 1),  # not a CPU of this machine
    ],
)
def test_hard_faults(small, placed, reserved, faults) -> None:  # type: ignore[no-untyped-def]
    assert len(hard_faults(small, P(reserved), placed)) == faults


def test_isolated_cpus_in_a_shared_set_are_a_fault() -> None:
    from topology.tree import Machine

    machine = load_machine(SMALL)
    isolated = Machine(
        sockets=machine.sockets,
        online=machine.online,
        isolated=P("4-5"),
        distances=machine.distances,
    )
    assert len(hard_faults(isolated, P(""), [Placed("s", P("0-7"), False)])) == 1
    assert hard_faults(isolated, P(""), [Placed("x", P("4-5"), True)]) == []


@pytest.mark.parametrize(
    ("count", "reserved", "nodes"),
    [(0, "", 0), (1, "", 1), (8, "", 1), (9, "", 2), (16, "", 2), (17, "", 3), (8, "0", 1)],
)
def test_fewest_nodes(small, count, reserved, nodes) -> None:  # type: ignore[no-untyped-def]
    # Each node holds 8 CPUs; reserving CPU 0 leaves node 0 with 7 but node 1 with 8.
    assert fewest_nodes(small, P(reserved), count) == nodes


@pytest.mark.parametrize(
    ("cpus", "aligned"),
    [("0-1", True), ("0-3,16-19", True), ("3-4", False), ("0-7,16-23", True), ("0-8", False)],
)
def test_numa_aligned(small, cpus, aligned) -> None:  # type: ignore[no-untyped-def]
    # 3-4 straddles nodes 0 and 1 for 2 CPUs; 0-8 spans 3 nodes (0-3, 4-7, 8) for 9 CPUs.
    assert numa_aligned(small, P(""), P(cpus)) is aligned


@pytest.mark.parametrize(
    ("cpus", "whole"),
    [("0,16", True), ("0-1,16-17", True), ("0-1", False), ("0,17", False), ("", True)],
)
def test_whole_cores(small, cpus, whole) -> None:  # type: ignore[no-untyped-def]
    assert whole_cores(small, P(cpus)) is whole


def test_affinity_objective_uses_the_policy_closeness(small) -> None:  # type: ignore[no-untyped-def]
    close = set_closeness(small)
    n0, n1, n2 = frozenset({0}), frozenset({1}), frozenset({2})
    # Same node 1.0; nodes 0 and 1 share a die (distance 11): 0.75 + 0.25 * 10/11;
    # other socket (distance 21): 0.5 * 10/21 (agent/policy/closeness.py tiers).
    assert close(n0, n0) == 1.0
    assert close(n0, n1) == pytest.approx(0.75 + 0.25 * 10 / 11)
    assert close(n0, n2) == pytest.approx(0.5 * 10 / 21)
    assert close(n0, frozenset({0, 2})) == pytest.approx((1.0 + 0.5 * 10 / 21) / 2)
    weights = {("web", "db"): 5, ("db", "web"): 0, ("a", "b"): -2, ("gone", "db"): 7}
    where = {"web": n0, "db": n1, "a": n0, "b": n2}
    expected = 5 * (0.75 + 0.25 * 10 / 11) - 2 * (0.5 * 10 / 21)
    assert affinity_objective(weights, where, close) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("value", "best", "worst", "share"),
    [(10, 10, 2, 1.0), (2, 10, 2, 0.0), (6, 10, 2, 0.5), (-30, -20, -60, 0.75), (3, 3, 3, 1.0)],
)
def test_attainment(value: float, best: float, worst: float, share: float) -> None:
    assert attainment(value, best, worst) == pytest.approx(share)
