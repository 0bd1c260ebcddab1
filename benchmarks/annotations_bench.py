"""Large annotations against the real daemon: what they cost, and what they must not cost.

Kubernetes allows 256 KiB of annotations per pod. With the agent (`numa-agent run`
in its own process) in front of the in-memory runtime (its own process too):

- parse: one worst-case 64 KiB annotation of each language, parsed once and cached;
- pass-through under parsing: Version p50/p99 alone, and while 4 creates with
  distinct 64 KiB affinity annotations run (issue 12, item 11);
- big pods: CreateContainer latency for pods with 200 KiB of annotations, then the
  state file's size and the agent's RSS with 110 such pods of 4 containers each
  (issue 12, item 5: only the annotations the agent reads are kept).

Usage: python -m benchmarks.annotations_bench [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

from agent.affinity import parse_pod_affinities
from agent.kubelet import kubelet_container_config, kubelet_pod_config
from agent.rules import parse_pod_rules
from agent.workload import QoSClass
from benchmarks.relay_bench import PY, Process, drive, scratch, start_agent
from devtools.criclient import CRIClient
from devtools.fakesysfs import write_shape

KIB = 1024


@dataclass(frozen=True, slots=True)
class Results:
    parse_crm_ms: float
    parse_rules_ms: float
    parse_cached_us: float
    version_alone_p50_ms: float
    version_alone_p99_ms: float
    version_parsing_p50_ms: float
    version_parsing_p99_ms: float
    creates_with_64k_ms: float  # wall time of the 4 concurrent creates
    create_200k_p50_ms: float
    create_200k_p99_ms: float
    pods: int
    containers: int
    state_file_kib: float
    agent_rss_mib: float


def crm_annotation(tag: str, size: int = 62 * KIB) -> str:
    """cri-resource-manager affinity rules for container `main`, `size` bytes long."""
    lines = ["main:"]
    n = 0
    while sum(len(line) + 1 for line in lines) < size - 200:
        values = ", ".join(f"v{tag}{n}x{i:04d}" for i in range(40))
        lines.append(
            f"- match: {{key: labels/k{n % 9}, operator: In, values: [{values}]}}\n  weight: 2"
        )
        n += 1
    return "\n".join(lines) + "\n"


def rules_annotation(tag: str, size: int = 62 * KIB) -> str:
    """numa-agent.io/affinity with preferred terms of long value lists, `size` bytes."""
    terms = []
    text = ""
    n = 0
    while True:
        values = ", ".join(f"v{tag}{n}x{i:03d}" for i in range(60))
        term = (
            f"  - weight: 10\n    podAffinityTerm:\n      labelSelector:\n"
            f"        matchExpressions: [{{key: k{n}, operator: In, values: [{values}]}}]\n"
            f"      topologyKey: numa-agent.io/numa\n"
        )
        candidate = "podAffinity:\n  preferredDuringSchedulingIgnoredDuringExecution:\n"
        candidate += "".join([*terms, term])
        if len(candidate) > size or len(terms) == 32:
            return text
        terms.append(term)
        text = candidate
        n += 1


def timed_ms(fn: object, *args: object) -> float:
    start = time.perf_counter()
    fn(*args)  # type: ignore[operator]
    return (time.perf_counter() - start) * 1000


def measure_parse() -> tuple[float, float, float]:
    crm = {"cri-resource-manager.intel.com/affinity": crm_annotation("p")}
    rules = {"numa-agent.io/affinity": rules_annotation("p")}
    crm_ms = timed_ms(parse_pod_affinities, crm)
    rules_ms = timed_ms(parse_pod_rules, rules)
    start = time.perf_counter()
    for _ in range(1000):
        parse_pod_rules(rules)
    return crm_ms, rules_ms, (time.perf_counter() - start) * 1000


def big_pod(client: CRIClient, name: str, annotations: dict[str, str], containers: int) -> float:
    """A pod as kubelet makes it; returns the slowest CreateContainer in milliseconds."""
    config = kubelet_pod_config(
        name, "bench", str(uuid.uuid4()), annotations=annotations, qos=QoSClass.BURSTABLE
    )
    sandbox = client.run_pod_sandbox(config)
    slowest = 0.0
    for c in range(containers):
        spec = kubelet_container_config(config, f"c{c}", 10, 0)
        start = time.perf_counter()
        cid = client.create_container(sandbox, spec, config)
        slowest = max(slowest, (time.perf_counter() - start) * 1000)
        client.start_container(cid)
    return slowest


def last_applied(size: int) -> str:
    """What `kubectl apply` leaves: the whole manifest, JSON, `size` bytes."""
    filler = "x" * (size - 40)
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "data": filler})


def measure(quick: bool = False) -> Results:
    crm_ms, rules_ms, cached_ms = measure_parse()
    pods = 10 if quick else 110
    with scratch() as base:
        socket = base / "rt.sock"
        runtime = Process(
            [PY, "-m", "benchmarks.serve_memory", str(socket)], socket, base / "rt.log"
        )
        sysfs = write_shape("xeon-2s-2numa", base / "sysfs")
        agent = start_agent(base, f"unix://{socket}", sysfs)
        client = CRIClient(str(base / "agent.sock"), timeout=120)
        try:
            calls = 60 if quick else 400
            alone = drive(lambda i: client.version(), calls, 1)
            # Version from one thread while 4 creates with distinct 64 KiB annotations run.
            big = [
                {
                    "cri-resource-manager.intel.com/affinity": crm_annotation(f"c{n}"),
                    "numa-agent.io/affinity": rules_annotation(f"r{n}"),
                }
                for n in range(4)
            ]
            with ThreadPoolExecutor(4) as pool:
                began = time.perf_counter()
                creates = [pool.submit(big_pod, client, f"big-{n}", big[n], 1) for n in range(4)]
                during = drive(lambda i: client.version(), calls, 1)
                for done in creates:
                    done.result()
                creates_ms = (time.perf_counter() - began) * 1000
            # Pods with 200 KiB of annotations (last-applied-configuration and a rule).
            create_ms: list[float] = []
            for p in range(pods):
                annotations = {
                    "kubectl.kubernetes.io/last-applied-configuration": last_applied(198 * KIB),
                    "numa-agent.io/affinity": rules_annotation(f"pod{p}", 2 * KIB),
                }
                create_ms.append(big_pod(client, f"pod-{p}", annotations, 4))
            create_ms.sort()
            state = base / "state" / "state.json"
            return Results(
                parse_crm_ms=round(crm_ms, 1),
                parse_rules_ms=round(rules_ms, 1),
                parse_cached_us=round(cached_ms, 2),
                version_alone_p50_ms=round(alone.p50_ms, 3),
                version_alone_p99_ms=round(alone.p99_ms, 3),
                version_parsing_p50_ms=round(during.p50_ms, 3),
                version_parsing_p99_ms=round(during.p99_ms, 3),
                creates_with_64k_ms=round(creates_ms, 1),
                create_200k_p50_ms=round(create_ms[len(create_ms) // 2], 2),
                create_200k_p99_ms=round(
                    create_ms[min(len(create_ms) - 1, int(len(create_ms) * 0.99))], 2
                ),
                pods=pods,
                containers=pods * 4,
                state_file_kib=round(state.stat().st_size / KIB, 1),
                agent_rss_mib=round(agent.rss_mib(), 1),
            )
        finally:
            client.close()
            agent.stop()
            runtime.stop()


def report(results: Results) -> str:
    return "\n".join(f"{key:28} {value}" for key, value in asdict(results).items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    print(report(measure(args.quick)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
