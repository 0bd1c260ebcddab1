"""The quality benchmark runs, the suite is what the issue asks for, the baselines and
the exhaustive search behave as claimed on small hand-checked cases."""

from __future__ import annotations

from collections import Counter

import pytest

from benchmarks import report
from benchmarks.placers import AgentPlacer, FirstFitPlacer, RandomPlacer
from benchmarks.quality import evaluate, exhaustive, load_machine, run
from benchmarks.scenarios import SMALL, Add, Scenario, pod, replicas, suite
from topology.cpuset import CPUSet


def test_suite_is_large_varied_and_deterministic() -> None:
    scenarios = suite()
    assert len(scenarios) >= 30
    families = Counter(s.family for s in scenarios)
    for family in ("pairs", "group", "replicas", "namespace", "mixed", "pressure", "churn"):
        assert families[family] >= 3, family
    assert [s.name for s in scenarios] == [s.name for s in suite()]
    assert len({s.name for s in scenarios}) == len(scenarios)


def test_first_fit_takes_whole_cores_lowest_first() -> None:
    machine = load_machine(SMALL)
    placer = FirstFitPlacer(machine, suite()[0].config)
    (a,) = pod("a", [("a", 2000)])
    (b,) = pod("b", [("b", 3000)])
    assert placer.place(a) == CPUSet.parse("0,16")  # core 0 = CPUs 0 and 16
    assert placer.place(b) == CPUSet.parse("1,17,2")  # core 1 whole, then the lowest free


def test_random_is_seeded() -> None:
    machine = load_machine(SMALL)
    requests = pod("a", [("a", 2000), ("b", 1000)])
    picks = []
    for _ in range(2):
        placer = RandomPlacer(machine, suite()[0].config, seed=3)
        picks.append([placer.place(r) for r in requests])
    assert picks[0] == picks[1]


def test_exhaustive_spreads_two_replicas_across_sockets() -> None:
    machine = load_machine(SMALL)
    anti = (
        "db:\n- scope: {operator: AlwaysTrue}\n"
        "  match: {key: pod/labels/app, operator: Equals, values: [db]}\n  weight: 10\n"
    )
    events = tuple(
        Add(r)
        for i in range(2)
        for r in pod(f"db-{i}", [("db", 1000)], labels={"app": "db"}, anti_affinity=anti)
    )
    scenario = Scenario("two-replicas", "replicas", SMALL, events)
    score, final = run(scenario, machine, AgentPlacer(machine, scenario.config))
    bounds = exhaustive(scenario, machine, final)
    assert bounds is not None
    # Each replica pushes the other with -10: best is the other socket (closeness
    # 0.5 * 10/21), worst the same node (1.0), both ways.
    assert bounds.best == pytest.approx(-2 * 10 * 0.5 * 10 / 21)
    assert bounds.worst == pytest.approx(-2 * 10 * 1.0)
    assert score.objective == pytest.approx(bounds.best)


def test_evaluate_scores_every_placer_on_a_small_scenario() -> None:
    rows = evaluate([replicas(1)])
    (row,) = rows
    assert set(row["scores"]) == {"agent", "agent-symmetric", "first-fit", "random"}
    for score in row["scores"].values():
        assert score["hard_faults"] == 0
        assert score["placed"] + score["refused"] == row["containers"]
    summary = report.quality_summary(rows)
    assert summary["scenarios"] == 1
    assert "| replicas-" in report.quality_table(rows)
