"""The benchmarks of issue 12 in tiny runs (real processes, real sockets): worker
starvation and unknown method names produce every number they report."""

from __future__ import annotations

import pytest

from benchmarks import method_names_bench, starvation_bench
from benchmarks.__main__ import main


def test_starvation_bench_reports_every_kind_idle_and_held() -> None:
    result = starvation_bench.evaluate(starvation_bench.QUICK)
    assert result["streams_opened"] == starvation_bench.QUICK.streams
    for phase in ("idle", "holding"):
        for kind in ("pass_through", "placement", "status"):
            numbers = result[phase][kind]
            assert numbers["failed"] == 0 and numbers["answered"] > 0, (phase, kind)
            assert numbers["p50_ms"] <= numbers["p99_ms"]
        assert result[phase]["agent_threads"] > 0
    assert "streams opened" in starvation_bench.table(result)


def test_method_names_bench_measures_rss_and_metrics() -> None:
    result = method_names_bench.evaluate(50)
    assert result["names"] == 50
    for key in ("rss_before_mib", "rss_after_mib", "metrics_before_bytes", "metrics_after_bytes"):
        value = result[key]
        assert isinstance(value, int | float) and value > 0, (key, value)
    assert "50 distinct unknown method names" in method_names_bench.summary(result)


def test_unknown_part_is_refused() -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--only", "relay,nonsense"])
    assert exit_.value.code == 2


def test_hung_updates_bench_reports_every_n() -> None:
    from benchmarks import hung_updates_bench

    rows = hung_updates_bench.evaluate(0.5, 1)
    assert [r["hung"] for r in rows] == list(hung_updates_bench.HUNG)
    for row in rows:
        assert 0 <= row["median_ms"] <= row["max_ms"], row
    assert "hung containers" in hung_updates_bench.table(rows)
