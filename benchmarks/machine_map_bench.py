"""The machine map at scale: a 512-CPU machine with 500 containers placed by the real
agent (through `simulate`), then the page's size, the time to build the status
document and to render the HTML, and (when Chromium is there) the time a headless
browser takes to load and lay it out.

Usage: .venv/bin/python -m benchmarks.machine_map_bench [--out DIR] [--samples 20]

--out keeps the page and a full-page screenshot of it, to look at.
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
from typing import Any

from agent.introspect.document import machine_document
from agent.introspect.machine_map import render_machine_map
from agent.simulate.driver import SimulationResult, run_scenario
from agent.simulate.machine import load_machine
from agent.simulate.scenario import Scenario, parse_scenario
from benchmarks import chromium

# The placement benchmark's first machine: 2 sockets x 2 NUMA x 64 cores x 2 threads,
# two L3 groups per NUMA node.
TOPOLOGY = {
    "sockets": 2,
    "numa_per_die": 2,
    "cores_per_numa": 64,
    "l3_per_numa": 2,
    "memory_per_numa": "256Gi",
}
RESERVED = "0,256"
CONTAINERS = 500
APPS = (
    "checkout",
    "payments",
    "search-indexer",
    "recommendations",
    "inventory",
    "notifications",
    "session-cache",
    "ledger",
    "thumbnailer",
    "fraud-scoring",
)
AFFINITY = "app: [{partner}]"
ANTI_AFFINITY = """\
app:
- scope: {{key: pod/labels/app, operator: Equals, values: [{own}]}}
  match: {{key: name, operator: Exists}}
"""


def _suffix(rng: random.Random, length: int) -> str:
    return "".join(rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(length))


def _pod(serial: int, rng: random.Random) -> dict[str, Any]:
    """One pod of a Deployment-like name, the workload mix of placement_bench."""
    app = rng.choice(APPS)
    name = f"{app}-{_suffix(rng, 9)}-{_suffix(rng, 5)}"
    roll = rng.random()
    if serial % 100 == 0:
        return {
            "name": f"kube-proxy-{_suffix(rng, 5)}",
            "namespace": "kube-system",
            "containers": [{"name": "kube-proxy", "cpu": "100m", "memory": "64Mi"}],
        }
    if roll < 0.15:
        cpu = str(rng.choice((1, 1, 2, 2, 4)))
        container = {"name": "app", "cpu": cpu, "memory": "1Gi"}
    elif roll < 0.25:
        container = {"name": "app"}
    else:
        milli = rng.choice((50, 100, 200, 250, 500))
        container = {"name": "app", "cpu": f"{milli}m", "cpu_limit": None, "memory": "256Mi"}
    pod: dict[str, Any] = {
        "name": name,
        "namespace": rng.choice(("shop", "shop", "analytics", "default")),
        "labels": {"app": app},
        "containers": [container],
    }
    if rng.random() < 0.5:
        pod["annotations"] = {
            "cri-resource-manager.intel.com/affinity": AFFINITY.format(partner=rng.choice(APPS)),
            "cri-resource-manager.intel.com/anti-affinity": ANTI_AFFINITY.format(own=app),
        }
    return pod


def big_scenario(containers: int = CONTAINERS, seed: int = 512) -> Scenario:
    """`containers` single-container pods on the 512-CPU machine (same seed, same pods)."""
    rng = random.Random(seed)
    pods = [_pod(serial, rng) for serial in range(containers)]
    return parse_scenario(
        {
            "description": f"{containers} containers on 512 CPUs",
            "topology": TOPOLOGY,
            "config": {"reserved_cpus": RESERVED},
            "pods": pods,
        },
        base_dir=Path("."),
        source="machine-map benchmark",
    )


def run_big(containers: int = CONTAINERS) -> SimulationResult:
    scenario = big_scenario(containers)
    return run_scenario(scenario, load_machine(scenario.topology))


@dataclass(frozen=True, slots=True)
class Measured:
    cpus: int
    containers: int
    exclusive: int
    html_bytes: int
    document_ms: float  # status document from the agent's books (median)
    render_ms: float  # HTML from the document (median)
    browser_load_ms: float | None  # the page's loadEventEnd (since navigation start)
    browser_layout_ms: float | None  # its whole layout done (since navigation start)

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


def _median_ms(fn: Any, samples: int) -> tuple[float, Any]:
    times = []
    value = None
    for _ in range(samples):
        began = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - began)
    return round(statistics.median(times) * 1000, 2), value


def measure(samples: int = 20, out: Path | None = None) -> Measured:
    result = run_big()
    reserved = result.scenario.config.reserved_cpus

    def document() -> dict[str, Any]:
        return machine_document(result.machine, reserved, result.placements, result.capacity)

    document_ms, doc = _median_ms(document, samples)
    render_ms, html = _median_ms(lambda: render_machine_map(doc, source="benchmark"), samples)
    data = html.encode()
    load_ms = layout_ms = None
    with tempfile.TemporaryDirectory(prefix="na-map-bench-") as tmp:
        page = (out or Path(tmp)) / "machine-map-512.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_bytes(data)
        if chromium.find_chromium() is not None:
            with chromium.launch() as browser:
                timings = [browser.load(page, 1600) for _ in range(5)]
                if out is not None:
                    browser.screenshot(out / "machine-map-512.png")
            load_ms = statistics.median(t.load_event_end_ms for t in timings)
            layout_ms = statistics.median(t.laid_out_ms for t in timings)
    return Measured(
        cpus=len(result.machine.online),
        containers=len(result.placements),
        exclusive=sum(1 for p in result.placements if p.exclusive),
        html_bytes=len(data),
        document_ms=document_ms,
        render_ms=render_ms,
        browser_load_ms=load_ms,
        browser_layout_ms=layout_ms,
    )


def report(m: Measured) -> str:
    browser = (
        f"headless Chromium, 1600 px wide (medians of 5): loaded {m.browser_load_ms:.0f} ms, "
        f"laid out {m.browser_layout_ms:.0f} ms after navigation start"
        if m.browser_load_ms is not None and m.browser_layout_ms is not None
        else "Chromium: not installed, not measured"
    )
    return (
        f"{m.cpus} CPUs, {m.containers} containers ({m.exclusive} exclusive): "
        f"HTML {m.html_bytes / 1024:.0f} KiB; status document {m.document_ms:.1f} ms, "
        f"HTML render {m.render_ms:.1f} ms (medians)\n{browser}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--out", type=Path, help="keep the page and its screenshot here")
    args = parser.parse_args(argv)
    print(report(measure(args.samples, args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
