"""The NRI door's benchmark in a tiny run against the stand-in: it produces every
number it reports (containerd 2 is measured only when named)."""

from __future__ import annotations

from benchmarks import nri_bench


def test_nri_bench_reports_create_and_synchronize_times() -> None:
    result = nri_bench.evaluate(nri_bench.QUICK, bin_dir=None)
    s = result["standin"]
    assert s["placed"] >= nri_bench.QUICK.placed
    for key in ("create_container", "create_container_in_plugin", "stop_container"):
        assert s[key]["n"] > 0 and 0 < s[key]["p50_ms"] <= s[key]["p99_ms"], key
    for label in ("restored", "adopted"):
        sync = s[f"synchronize_{label}"]
        assert sync["containers"] == s["placed"] and sync["n"] >= 1
    # Restored from the state file: nothing moved.
    assert s["synchronize_restored"]["updates"] == 0
    assert "NUMA_AGENT_CONTAINERD2_DIR" in result["containerd2"]
    assert "synchronize (restored, 0 updates)" in nri_bench.table(result)
