"""Placement decision time on large machines: p50 / p99 of Policy.place with N placed.

Usage: .venv/bin/python benchmarks/placement_bench.py [--samples 200]

Machines are fake sysfs trees (devtools.fakesysfs) read by the real reader. The
workload is a realistic mix: small Burstable and BestEffort containers, Guaranteed
ones with 1-4 exclusive CPUs, and about half of the pods carrying affinity and
anti-affinity annotations parsed and evaluated by agent.affinity.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from agent.affinity import parse_pod_affinities
from agent.policy.config import PolicyConfig
from agent.policy.errors import ResourceExhausted, RuleUnsatisfied
from agent.policy.policy import Policy
from agent.policy.request import ContainerRequest, Resources
from agent.rules import NO_RULES, parse_pod_rules
from agent.workload import ContainerInfo, PodInfo, QoSClass
from devtools.fakesysfs import write_sysfs
from topology.shapes import MachineSpec
from topology.sysfs import read_machine
from topology.tree import Machine

MACHINES = {
    "2s x 2numa x 64c x 2t (512)": MachineSpec(
        sockets=2, numa_per_die=2, cores_per_numa=64, l3_per_numa=2
    ),
    "4s x 2numa x 32c x 2t (512)": MachineSpec(sockets=4, numa_per_die=2, cores_per_numa=32),
    "8s x 1numa x 32c x 2t (512)": MachineSpec(sockets=8, cores_per_numa=32),
}
PLACED = (0, 100, 250, 500)
APPS = 40
# pod-rules: about 65% of pods carry numa-agent.io rules; all-rules: every pod does.
WORKLOADS = ("cri-rm", "pod-rules", "all-rules")
REFUSED = (ResourceExhausted, RuleUnsatisfied)

# numa-agent.io rules, by share of pods (the rest have none).
POD_RULES = (
    (
        0.2,
        "podAntiAffinity: {{preferredDuringSchedulingIgnoredDuringExecution: [{{weight: 50, "
        "podAffinityTerm: {{labelSelector: {{matchLabels: {{app: {own}}}}}, "
        "topologyKey: numa-agent.io/socket}}}}]}}",
        None,
    ),
    (
        0.15,
        "podAffinity: {{preferredDuringSchedulingIgnoredDuringExecution: [{{weight: 30, "
        "podAffinityTerm: {{labelSelector: {{matchLabels: {{app: {partner}}}}}, "
        "topologyKey: numa-agent.io/numa}}}}]}}",
        None,
    ),
    (
        0.1,
        "podAntiAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: [{{labelSelector: "
        "{{matchLabels: {{app: {own}}}}}, topologyKey: numa-agent.io/numa}}]}}",
        None,
    ),
    (
        0.15,
        None,
        "[{{maxSkew: 1, topologyKey: numa-agent.io/numa, whenUnsatisfiable: ScheduleAnyway, "
        "labelSelector: {{matchLabels: {{app: {own}}}}}}}]",
    ),
    (
        0.05,
        None,
        "[{{maxSkew: 2, topologyKey: numa-agent.io/socket, whenUnsatisfiable: DoNotSchedule, "
        "labelSelector: {{matchLabels: {{app: {own}}}}}}}]",
    ),
)

AFFINITY = """\
app:
- scope: {{key: pod/labels/app, operator: In, values: [{partner}]}}
  match: {{key: name, operator: Exists}}
  weight: 5
"""
ANTI_AFFINITY = """\
app:
- scope: {{key: pod/labels/app, operator: Equals, values: [{own}]}}
  match: {{key: name, operator: Exists}}
"""


def machine(spec: MachineSpec) -> Machine:
    with tempfile.TemporaryDirectory() as tmp:
        write_sysfs(spec, Path(tmp))
        return read_machine(Path(tmp), cpu_info=False)


@dataclass(frozen=True, slots=True)
class Draw:
    """One container of the realistic mix: its app, QoS, CPU request and limit
    (None: the request) and its pod's annotations."""

    app: str
    qos: QoSClass
    milli: int
    limit: int | None
    annotations: dict[str, str]


def draw(rng: random.Random, workload: str = "cri-rm") -> Draw:
    """The mix of QoS classes and rules every placement benchmark uses."""
    app = f"app{rng.randrange(APPS)}"
    roll = rng.random()
    limit: int | None
    if roll < 0.15:
        qos, milli, limit = QoSClass.GUARANTEED, rng.choice((1, 1, 2, 2, 4)) * 1000, None
    elif roll < 0.25:
        qos, milli, limit = QoSClass.BESTEFFORT, 0, 0
    else:
        qos, milli, limit = QoSClass.BURSTABLE, rng.choice((50, 100, 200, 250, 500)), 0
    annotations: dict[str, str] = {}
    partner = f"app{rng.randrange(APPS)}"
    if workload == "cri-rm" and rng.random() < 0.5:
        annotations["cri-resource-manager.intel.com/affinity"] = AFFINITY.format(partner=partner)
        annotations["cri-resource-manager.intel.com/anti-affinity"] = ANTI_AFFINITY.format(own=app)
    elif workload in ("pod-rules", "all-rules"):
        roll = rng.random()
        if workload == "all-rules":
            roll *= sum(share for share, _, _ in POD_RULES)
        for share, affinity, spread in POD_RULES:
            roll -= share
            if roll < 0:
                if affinity is not None:
                    text = affinity.format(own=app, partner=partner)
                    annotations["numa-agent.io/affinity"] = text
                if spread is not None:
                    text = spread.format(own=app)
                    annotations["numa-agent.io/topology-spread-constraints"] = text
                break
    return Draw(app, qos, milli, limit, annotations)


def make_request(serial: int, rng: random.Random, workload: str = "cri-rm") -> ContainerRequest:
    drawn = draw(rng, workload)
    annotations = drawn.annotations
    pod = PodInfo(
        uid=f"uid-{serial}",
        name=f"{drawn.app}-{serial}",
        namespace="default",
        qosclass=drawn.qos,
        labels={"app": drawn.app},
        annotations=annotations,
    )
    container = ContainerInfo(name="app", pod=pod, labels={"io.kubernetes.container.name": "app"})
    milli = drawn.milli
    shares = max(milli * 1024 // 1000, 2)
    quota = (drawn.limit if drawn.limit is not None else milli) * 100
    resources = Resources(cpu_shares=shares, cpu_quota=quota, cpu_period=100_000)
    rules = parse_pod_affinities(annotations).rules_for("app")
    pod_rules = parse_pod_rules(annotations) if workload != "cri-rm" else NO_RULES
    return ContainerRequest(f"c{serial}", container, resources, rules, pod_rules)


def measure(
    hw: Machine, placed: int, samples: int, workload: str = "cri-rm"
) -> tuple[float, float, int]:
    rng = random.Random(placed * 7919 + 1)
    pol = Policy(hw, PolicyConfig())
    serial = 0
    while len(pol.assignments()) < placed:
        serial += 1
        try:
            pol.place(make_request(serial, rng, workload))
        except REFUSED:
            continue
    times: list[float] = []
    for _ in range(samples):
        serial += 1
        req = make_request(serial, rng, workload)
        start = time.perf_counter()
        try:
            pol.place(req)
        except REFUSED:
            continue
        finally:
            times.append(time.perf_counter() - start)
        pol.release(req.key)
    times.sort()
    p50 = statistics.median(times) * 1000
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))] * 1000
    return p50, p99, len(pol.assignments())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--workload", choices=WORKLOADS, action="append")
    args = parser.parse_args(argv)
    print(f"{'machine':32} {'workload':10} {'placed':>6} {'p50 ms':>8} {'p99 ms':>8}")
    for name, spec in MACHINES.items():
        hw = machine(spec)
        for workload in args.workload or WORKLOADS:
            for placed in PLACED:
                p50, p99, count = measure(hw, placed, args.samples, workload)
                print(f"{name:32} {workload:10} {count:6d} {p50:8.3f} {p99:8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
