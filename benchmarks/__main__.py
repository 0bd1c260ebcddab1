"""`make bench`: relay cost, worker starvation, unknown method names, large
annotations, placement speed and quality, the machine map's size and render
time, and the NRI door's answer times in one run (or some: --only); prints the
tables and writes everything as JSON (bench-results/results.json)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import platform
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

from benchmarks import (
    annotations_bench,
    hung_updates_bench,
    lifetime_bench,
    machine_map_bench,
    method_names_bench,
    nri_bench,
    placement_bench,
    quality,
    relay_bench,
    report,
    starvation_bench,
)
from devtools.containerd import containerd2_dir

PARTS = (
    "relay",
    "starvation",
    "hung-updates",
    "method-names",
    "annotations",
    "placement",
    "quality",
    "machine-map",
    "nri",
)


def machine_info() -> dict[str, Any]:
    model = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return {
        "cpu": model,
        "cpus": psutil.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "grpcio": metadata.version("grpcio"),
        "virtualized": Path("/sys/hypervisor").exists()
        or "hypervisor" in Path("/proc/cpuinfo").read_text(),
    }


def placement_speed(samples: int) -> list[dict[str, Any]]:
    rows = []
    for name, spec in placement_bench.MACHINES.items():
        hw = placement_bench.machine(spec)
        for workload in placement_bench.WORKLOADS:
            for placed in placement_bench.PLACED:
                p50, p99, count = placement_bench.measure(hw, placed, samples, workload)
                rows.append(
                    {
                        "machine": name,
                        "workload": workload,
                        "placed": count,
                        "p50_ms": round(p50, 3),
                        "p99_ms": round(p99, 3),
                    }
                )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks that it runs")
    parser.add_argument("--no-containerd", action="store_true")
    parser.add_argument(
        "--only",
        default=",".join(PARTS),
        help=f"comma-separated parts to run, of {', '.join(PARTS)} (default: all)",
    )
    args = parser.parse_args(argv)
    parts = set(args.only.split(","))
    if parts - set(PARTS):
        parser.error(f"--only: unknown parts {sorted(parts - set(PARTS))}; known: {PARTS}")

    began = time.monotonic()
    results: dict[str, Any] = {"machine": machine_info(), "quick": args.quick}
    print(f"machine: {results['machine']}\n", flush=True)

    if "relay" in parts:
        plan = relay_bench.QUICK if args.quick else relay_bench.Plan()
        ctrd_plan = (
            None
            if args.no_containerd
            else (relay_bench.QUICK if args.quick else relay_bench.CONTAINERD_PLAN)
        )
        relay: dict[str, Any] = relay_bench.evaluate(plan, ctrd_plan)
        results["relay"] = relay
        for name, backend in relay.items():
            print(f"## Relay cost: {name} (ms; 'added' = agent p50 - direct p50)\n")
            print(report.relay_table(backend), "\n", flush=True)

    if "starvation" in parts:
        held = starvation_bench.evaluate(
            starvation_bench.QUICK if args.quick else starvation_bench.Plan()
        )
        results["starvation"] = held
        print("## Worker starvation: latency idle and while held (ms)\n")
        print(starvation_bench.table(held), "\n", flush=True)

    if "hung-updates" in parts:
        logging.disable(logging.WARNING)  # the hung containers' failures are the point
        try:
            rows = hung_updates_bench.evaluate(5.0, 1 if args.quick else 5)
        finally:
            logging.disable(logging.NOTSET)
        results["hung_updates"] = rows
        print("## Updates behind hung containers\n")
        print(hung_updates_bench.table(rows), "\n", flush=True)

    if "method-names" in parts:
        names = method_names_bench.evaluate(
            method_names_bench.QUICK_NAMES if args.quick else method_names_bench.NAMES
        )
        results["method_names"] = names
        print("## Unknown method names\n")
        print(method_names_bench.summary(names), "\n", flush=True)

    if "annotations" in parts:
        big = annotations_bench.measure(args.quick)
        results["annotations"] = dataclasses.asdict(big)
        print("## Large annotations (64 KiB rules, 200 KiB pods)\n")
        print(annotations_bench.report(big), "\n", flush=True)

    if "placement" in parts:
        speed = placement_speed(20 if args.quick else 200)
        results["placement_speed"] = speed
        print("## Placement decision time (Policy.place, 512 CPUs)\n")
        print(report.speed_table(speed), "\n", flush=True)
        lives = lifetime_bench.measure(20 if args.quick else 200, 20 if args.quick else 110)
        results["pod_rules_cost"] = lives.as_dict()
        print("## Pod rules over many pods (simulate, state file)\n")
        print(lifetime_bench.report(lives), "\n", flush=True)

    if "quality" in parts:
        rows = quality.evaluate()
        results["quality"] = {"scenarios": rows, "summary": report.quality_summary(rows)}
        print("## Placement quality\n")
        print(report.quality_table(rows), "\n")
        print(json.dumps(results["quality"]["summary"], indent=1))

    if "machine-map" in parts:
        page = machine_map_bench.measure(3 if args.quick else 20, args.out)
        results["machine_map"] = page.as_dict()
        print("\n## Machine map (512 CPUs, 500 containers)\n")
        print(machine_map_bench.report(page), flush=True)

    if "nri" in parts:
        bin_dir = None if args.no_containerd else containerd2_dir()
        door = nri_bench.evaluate(nri_bench.QUICK if args.quick else nri_bench.Plan(), bin_dir)
        results["nri"] = door
        print("\n## NRI door: the runtime's wait for the plugin (ms)\n")
        print(nri_bench.table(door), flush=True)

    results["seconds"] = round(time.monotonic() - began, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "results.json"
    path.write_text(json.dumps(results, indent=1) + "\n")
    print(f"\nwrote {path} in {results['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
