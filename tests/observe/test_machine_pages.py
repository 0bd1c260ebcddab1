"""The machine map from the commands and the daemon: `status --html` from a running
agent, `/machine` next to `/metrics` (fresh on every request), `simulate --html`."""

from __future__ import annotations

import json
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from agent.cli import main
from agent.introspect.server import IntrospectServer, status_socket_path
from agent.observe.server import MACHINE_PATH, MetricsServer
from agent.workload import QoSClass
from devtools.criclient import CRIClient
from devtools.fakesysfs import write_shape
from tests.observe.test_daemon import Running, pod, start_daemon

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def sysfs() -> Iterator[Path]:
    # As test_daemon's: the daemon's 80-CPU Xeon, written once, in memory when possible.
    base = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(prefix="na-map-sysfs-", dir=base) as d:
        yield write_shape("xeon-2s-2numa", Path(d))


@pytest.fixture
def running(sockdir: Path, tmp_path: Path, sysfs: Path) -> Iterator[Running]:
    yield from start_daemon(sockdir, tmp_path, sysfs, "127.0.0.1:0")


def get(running: Running, path: str) -> tuple[int, str, str]:
    assert running.daemon.metrics_server is not None
    host, port = running.daemon.metrics_server.address
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=5) as reply:
            return reply.status, reply.headers["Content-Type"], reply.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.headers["Content-Type"], err.read().decode()


def cpu_cell(html: str, cpu: int) -> str:
    start = html.index(f'data-cpu="{cpu}"')
    return html[html.rindex("<div", 0, start) : html.index("</div>", start)]


def test_machine_page_next_to_metrics_is_fresh_on_every_request(running: Running) -> None:
    status, kind, html = get(running, MACHINE_PATH)
    assert status == 200 and kind == "text/html; charset=utf-8"
    assert "<script" not in html and 'data-cpu="79"' in html
    assert 'class="cpu r' in cpu_cell(html, 40)  # the daemon's reserved CPUs: 0,40
    with CRIClient(str(running.listen), timeout=5) as client:
        db = pod(client, "db", 4000, QoSClass.GUARANTEED)
    assert running.daemon.node is not None
    (placed,) = [p for p in running.daemon.node.placements() if p.container_id == db]
    status, _, html = get(running, MACHINE_PATH)
    assert status == 200
    first = int(placed.cpuset_cpus.replace("-", ",").split(",")[0])
    assert f'data-c="{db[:12]}"' in cpu_cell(html, first)
    assert html.count(f'data-c="{db[:12]}"') == 4
    # /metrics is still Prometheus' own.
    status, kind, text = get(running, "/metrics")
    assert status == 200 and kind.startswith("text/plain") and "numa_agent_build_info" in text


def test_status_html_writes_the_map_of_the_running_agent(
    running: Running, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with CRIClient(str(running.listen), timeout=5) as client:
        web = pod(client, "web", 1500, QoSClass.BURSTABLE)
    out = tmp_path / "machine.html"
    assert main(["status", "--listen", str(running.listen), "--html", str(out)]) == 0
    printed = capsys.readouterr()
    assert printed.out == "" and printed.err == ""  # the page is the output
    html = out.read_text()
    assert f"default/web/app\ncontainer {web[:12]}" in html
    assert html.count("data-cpu=") == 80
    # With --json, both: the page and the document.
    assert main(["status", "--listen", str(running.listen), "--html", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [c["pool"] for p in doc["pools"] for c in p["containers"]] == [
        p["name"] for p in doc["pools"] for _ in p["containers"]
    ]


def test_status_html_from_an_agent_too_old_for_the_map(
    sockdir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An agent of an earlier version: the document has no machine layout.
    old = {
        "version": 1,
        "machine": {"cpus": "0-3"},
        "pools": [],
        "reserved": {"cpus": "", "containers": []},
    }
    listen = sockdir / "numa-agent.sock"
    server = IntrospectServer(status_socket_path(str(listen)), lambda: old)
    server.start()
    try:
        out = tmp_path / "machine.html"
        assert main(["status", "--listen", str(listen), "--html", str(out)]) == 1
    finally:
        server.stop()
    err = capsys.readouterr().err
    assert "cannot draw the machine map" in err and "older than this numa-agent" in err
    assert not out.exists()


def test_a_page_that_cannot_be_built_answers_503() -> None:
    def starting() -> str:
        raise RuntimeError("the agent is starting or stopping; ask again")

    calls = threading.Event()

    def page() -> str:
        calls.set()
        return "<p>fine</p>"

    server = MetricsServer(
        "127.0.0.1:0", CollectorRegistry(), pages={"/machine": starting, "/ok": page}
    )
    try:
        host, port = server.address
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"http://{host}:{port}/machine", timeout=5)
        assert err.value.code == 503
        assert err.value.read().decode() == "the agent is starting or stopping; ask again\n"
        with urllib.request.urlopen(f"http://{host}:{port}/ok", timeout=5) as reply:
            assert reply.read() == b"<p>fine</p>" and reply.headers["Cache-Control"] == "no-store"
        assert calls.is_set()
    finally:
        server.stop()


def test_simulate_html_writes_the_map_after_the_events(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "refusals.html"
    assert main(["simulate", str(EXAMPLES / "refusals.yaml"), "--html", str(out)]) == 0
    text = capsys.readouterr().out
    assert "refused:" in text  # the usual output too
    html = out.read_text()
    assert "scenario " in html and "refusals.yaml" in html
    # Refusals are notes on the page; the refused container has no CPU.
    assert html.count('<p class="note">refused default/greedy/huge: RESOURCE_EXHAUSTED') == 1
    assert 'data-for="' in html


def test_simulate_html_to_a_directory_that_does_not_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "missing" / "map.html"
    assert main(["simulate", str(EXAMPLES / "web-cache.yaml"), "--html", str(out)]) == 1
    assert f"cannot write {out}" in capsys.readouterr().err
