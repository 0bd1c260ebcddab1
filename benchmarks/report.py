"""Tables for the terminal (and the README) from the benchmark results."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table (readable as plain text too)."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"]
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in cells:
        lines.append("| " + " | ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) + " |")
    return "\n".join(lines)


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


def relay_table(backend: Mapping[str, Any]) -> str:
    if "skipped" in backend:
        return f"(skipped: {backend['skipped']})"
    rows = []
    for r in backend["rows"]:
        added = r["agent_p50_ms"] - r["direct_p50_ms"]
        rows.append(
            (
                r["op"],
                r["concurrency"],
                r["direct_p50_ms"],
                r["agent_p50_ms"],
                round(added, 3),
                r["direct_p99_ms"],
                r["agent_p99_ms"],
                r["direct_per_s"],
                r["agent_per_s"],
                r["agent_cpu_ms_per_call"],
            )
        )
    text = table(
        (
            "call",
            "conc",
            "p50 direct",
            "p50 agent",
            "added",
            "p99 direct",
            "p99 agent",
            "/s direct",
            "/s agent",
            "agent CPU ms/call",
        ),
        rows,
    )
    return (
        f"{text}\nagent RSS: {backend['agent_rss_idle_mib']} MiB idle, "
        f"{backend['agent_rss_with_containers_mib']} MiB with "
        f"{backend['agent_containers']} containers placed"
    )


def speed_table(rows: Sequence[Mapping[str, Any]]) -> str:
    return table(
        ("machine", "workload", "placed", "p50 ms", "p99 ms"),
        [
            (r["machine"], r.get("workload", "cri-rm"), r["placed"], r["p50_ms"], r["p99_ms"])
            for r in rows
        ],
    )


def quality_table(rows: Sequence[Mapping[str, Any]]) -> str:
    out = []
    for r in rows:
        s = r["scores"]
        a, f, x = s["agent"], s["first-fit"], s["random"]
        out.append(
            (
                r["scenario"],
                r["containers"],
                sum(v["hard_faults"] for v in s.values()),
                f"{a['numa_aligned']}/{a['exclusive']}",
                f"{f['numa_aligned']}/{f['exclusive']}",
                f"{a['whole_cores']}/{a['even_exclusive']}",
                f"{f['whole_cores']}/{f['even_exclusive']}",
                a["objective"] if r["affinities"] else None,
                s["agent-symmetric"]["objective"] if r["affinities"] else None,
                f["objective"] if r["affinities"] else None,
                x["objective"] if r["affinities"] else None,
                r["best"],
                a["attainment"],
            )
        )
    return table(
        (
            "scenario",
            "ctrs",
            "faults",
            "NUMA agent",
            "NUMA ff",
            "cores agent",
            "cores ff",
            "obj agent",
            "obj sym",
            "obj ff",
            "obj random",
            "obj best",
            "agent/best",
        ),
        out,
    )


def quality_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Totals: faults per placer, alignment and whole-core shares, wins over baselines,
    mean attainment of the exhaustive optimum."""
    summary: dict[str, Any] = {"scenarios": len(rows)}
    for name in rows[0]["scores"] if rows else ():
        scores = [r["scores"][name] for r in rows]
        exclusive = sum(s["exclusive"] for s in scores)
        even = sum(s["even_exclusive"] for s in scores)
        reached = [
            s["attainment"] for r, s in zip(rows, scores, strict=True) if r["best"] is not None
        ]
        summary[name] = {
            "hard_faults": sum(s["hard_faults"] for s in scores),
            "refused": sum(s["refused"] for s in scores),
            "numa_aligned": round(sum(s["numa_aligned"] for s in scores) / max(exclusive, 1), 4),
            "whole_cores": round(sum(s["whole_cores"] for s in scores) / max(even, 1), 4),
            "mean_attainment": round(sum(reached) / len(reached), 4) if reached else None,
        }
    affine = [r for r in rows if r["affinities"]]
    for variant, prefix in (("agent", ""), ("agent-symmetric", "symmetric ")):
        for base in ("first-fit", "random"):
            wins = ties = losses = 0
            lost: list[str] = []
            for r in affine:
                agent = r["scores"][variant]["objective"]
                other = r["scores"][base]["objective"]
                if agent > other + 1e-9:
                    wins += 1
                elif agent < other - 1e-9:
                    losses += 1
                    lost.append(r["scenario"])
                else:
                    ties += 1
            summary[f"{prefix}vs {base}"] = {
                "wins": wins,
                "ties": ties,
                "losses": losses,
                "lost": lost,
            }
    summary["with_affinities"] = len(affine)
    summary["exhaustive"] = sum(r["best"] is not None for r in rows)
    return summary
