"""The cost of pod rules over many pods (issue 21): simulate time of 200 pods with
preferred terms against the same pods without them, the state file of kubelet's
default maxPods (110) with 3 preferred terms each, on a 2-socket EPYC.

Usage: .venv/bin/python -m benchmarks.lifetime_bench
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.simulate.driver import run_scenario
from agent.simulate.machine import load_machine
from agent.simulate.scenario import Scenario, parse_scenario

SHAPE = "epyc-2s-nps4"
# Three ordinary preferred terms: keep replicas of an app apart per NUMA node, near
# their partner per socket, and away from batch per L3 group.
TERMS = """\
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
  - weight: 50
    podAffinityTerm:
      labelSelector: {matchLabels: {app: OWN}}
      topologyKey: numa-agent.io/numa
  - weight: 20
    podAffinityTerm:
      labelSelector: {matchLabels: {tier: batch}}
      topologyKey: numa-agent.io/l3
podAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
  - weight: 30
    podAffinityTerm:
      labelSelector: {matchLabels: {app: PARTNER}}
      topologyKey: numa-agent.io/socket
"""


def scenario(pods: int, *, rules: bool) -> Scenario:
    specs: list[dict[str, Any]] = []
    for n in range(pods):
        app, partner = f"app{n % 20}", f"app{(n + 1) % 20}"
        pod: dict[str, Any] = {
            "name": f"{app}-{n}",
            "labels": {"app": app, "tier": "batch" if n % 5 == 0 else "web"},
            "containers": [{"name": "main", "cpu": "100m", "cpu_limit": "1", "memory": "64Mi"}],
        }
        if rules:
            pod["annotations"] = {
                "numa-agent.io/affinity": TERMS.replace("OWN", app).replace("PARTNER", partner)
            }
        specs.append(pod)
    data = {"topology": {"shape": SHAPE}, "pods": specs}
    return parse_scenario(data, base_dir=Path("."), source="lifetime-bench")


@dataclass(frozen=True, slots=True)
class Lifetime:
    pods: int
    seconds_without: float
    seconds_with: float
    state_pods: int
    state_bytes: int

    @property
    def ratio(self) -> float:
        return self.seconds_with / self.seconds_without

    def as_dict(self) -> dict[str, Any]:
        return {
            "pods": self.pods,
            "seconds_without_rules": round(self.seconds_without, 3),
            "seconds_with_preferred_terms": round(self.seconds_with, 3),
            "ratio": round(self.ratio, 2),
            "state_file_pods": self.state_pods,
            "state_file_bytes": self.state_bytes,
        }


def timed(plan: Scenario) -> float:
    machine = load_machine(plan.topology)
    start = time.perf_counter()
    result = run_scenario(plan, machine)
    took = time.perf_counter() - start
    assert not result.errors, result.errors[:3]
    return took


def state_bytes(pods: int) -> int:
    plan = scenario(pods, rules=True)
    with tempfile.TemporaryDirectory(prefix="na-bench-") as tmp:
        result = run_scenario(plan, load_machine(plan.topology), state_dir=Path(tmp))
        assert not result.errors, result.errors[:3]
        return (Path(tmp) / "state.json").stat().st_size


def measure(pods: int = 200, state_pods: int = 110) -> Lifetime:
    without = min(timed(scenario(pods, rules=False)) for _ in range(2))
    with_rules = min(timed(scenario(pods, rules=True)) for _ in range(2))
    return Lifetime(pods, without, with_rules, state_pods, state_bytes(state_pods))


def report(result: Lifetime) -> str:
    return "\n".join(
        [
            f"simulate, {result.pods} pods on {SHAPE}: {result.seconds_without:.2f} s without "
            f"rules, {result.seconds_with:.2f} s with 3 preferred terms each "
            f"({result.ratio:.2f}x)",
            f"state file, {result.state_pods} pods with 3 preferred terms each: "
            f"{result.state_bytes / 1024:.0f} KiB",
        ]
    )


def main() -> int:
    print(report(measure()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
