"""The status document as an operator reads it: agent line, then the pool tree, each
pool with its capacity and the containers placed in it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from topology.render import format_bytes


def format_duration(seconds: float) -> str:
    total = int(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h{minutes:02d}m"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def _count(text: str) -> int:
    # Counted from the Linux list form so the renderer needs only the document.
    total = 0
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        total += int(high or low) - int(low) + 1
    return total


def _containers(containers: Sequence[Mapping[str, Any]], indent: str) -> list[str]:
    rows = [
        (
            "exclusive" if c["exclusive"] else "shared",
            c["cpuset_cpus"] or "-",
            f"{c['namespace']}/{c['pod']}/{c['name']}",
            c["container_id"][:13],
        )
        for c in sorted(containers, key=lambda c: (not c["exclusive"], c["namespace"], c["pod"]))
    ]
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return [
        f"{indent}{kind:<{widths[0]}}  cpus {cpus:<{widths[1]}}  {who:<{widths[2]}}  {cid}".rstrip()
        for kind, cpus, who, cid in rows
    ]


def _pool_lines(pool: Mapping[str, Any]) -> list[str]:
    indent = "  " * pool["depth"]
    head = f"{indent}{pool['name']}  cpus {pool['cpus']}"
    if pool["numa_nodes"] and pool["name"].startswith(("socket", "die", "machine")):
        head += f"  (NUMA {','.join(str(n) for n in pool['numa_nodes'])})"
    exclusive = _count(pool["exclusive_cpus"])
    free = f"{pool['exclusive_free']} free"
    if pool["isolated_free"]:
        free += f" (+{pool['isolated_free']} isolated)"
    cap = (
        f"{indent}  exclusive {exclusive} used, {free}"
        f" | shared {_count(pool['shared_cpus'])} CPUs, {pool['shared_milli_used']}m used,"
        f" {pool['shared_milli_free']}m free"
    )
    if pool["memory_bytes"]:
        cap += (
            f" | memory {format_bytes(pool['memory_used_bytes'])} of "
            f"{format_bytes(pool['memory_bytes'])} requested"
        )
    return [head, cap, *_containers(pool["containers"], indent + "    ")]


def render_status(doc: Mapping[str, Any]) -> str:
    agent = doc["agent"]
    machine = doc["machine"]
    pools = doc["pools"]
    running = sum(len(p["containers"]) for p in pools) + len(doc["reserved"]["containers"])
    running += sum(len(c) for c in doc.get("unknown_pools", {}).values())
    lines = [
        f"numa-agent {agent['version']}  pid {agent['pid']}  up "
        f"{format_duration(agent['uptime_seconds'])}  CPU {agent['cpu_seconds']:.1f}s  "
        f"RSS {format_bytes(agent['rss_bytes'])}",
        f"  serving {agent['listen']} -> runtime {agent['runtime_endpoint']}",
        f"  metrics {agent['metrics_address'] or 'off'}",
        f"  {running} containers placed, {agent['pending_updates']} cpuset updates pending",
        f"machine: {_count(machine['cpus'])} CPUs ({machine['cpus']}), {machine['sockets']} "
        f"socket(s), {machine['numa_nodes']} NUMA node(s)"
        + (f", isolated {machine['isolated_cpus']}" if machine["isolated_cpus"] else "")
        + (f", reserved {machine['reserved_cpus']}" if machine["reserved_cpus"] else ""),
        "",
        "pools (exclusive: whole CPUs; shared: milliCPU requested of the pool's shared CPUs):",
    ]
    for pool in pools:
        lines.extend(_pool_lines(pool))
    reserved = doc["reserved"]
    if reserved["containers"] or reserved["cpus"]:
        lines.append(f"reserved  cpus {reserved['cpus'] or '(the shared CPUs)'}")
        lines.extend(_containers(reserved["containers"], "    "))
    for name, containers in doc.get("unknown_pools", {}).items():
        lines.append(f"{name} (not a pool of this machine)")
        lines.extend(_containers(containers, "    "))
    return "\n".join(lines) + "\n"
