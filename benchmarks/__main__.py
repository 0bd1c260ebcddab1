"""`make bench`: relay cost, placement speed, placement quality and the machine map's
size and render time in one run; prints the tables and writes everything as JSON
(bench-results/results.json)."""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

from benchmarks import machine_map_bench, placement_bench, quality, relay_bench, report


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
        for placed in placement_bench.PLACED:
            p50, p99, count = placement_bench.measure(hw, placed, samples)
            rows.append(
                {"machine": name, "placed": count, "p50_ms": round(p50, 3), "p99_ms": round(p99, 3)}
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks that it runs")
    parser.add_argument("--no-containerd", action="store_true")
    args = parser.parse_args(argv)

    began = time.monotonic()
    results: dict[str, Any] = {"machine": machine_info(), "quick": args.quick}
    print(f"machine: {results['machine']}\n", flush=True)

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

    speed = placement_speed(20 if args.quick else 200)
    results["placement_speed"] = speed
    print("## Placement decision time (Policy.place, 512 CPUs)\n")
    print(report.speed_table(speed), "\n", flush=True)

    rows = quality.evaluate()
    results["quality"] = {"scenarios": rows, "summary": report.quality_summary(rows)}
    print("## Placement quality\n")
    print(report.quality_table(rows), "\n")
    print(json.dumps(results["quality"]["summary"], indent=1))

    page = machine_map_bench.measure(3 if args.quick else 20, args.out)
    results["machine_map"] = page.as_dict()
    print("\n## Machine map (512 CPUs, 500 containers)\n")
    print(machine_map_bench.report(page), flush=True)

    results["seconds"] = round(time.monotonic() - began, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "results.json"
    path.write_text(json.dumps(results, indent=1) + "\n")
    print(f"\nwrote {path} in {results['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
