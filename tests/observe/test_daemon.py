"""A running Daemon (in-process) in front of the in-memory runtime served over gRPC on a
fake 2-socket machine: its Prometheus endpoint scraped over HTTP after real CRI calls,
and `numa-agent status` asking it over its introspection socket."""

from __future__ import annotations

import json
import re
import stat
import tempfile
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent.cli import main
from agent.config import AgentConfig
from agent.daemon import Daemon
from agent.introspect.server import status_socket_path
from agent.kubelet import kubelet_container_config, kubelet_pod_config
from agent.policy.config import PolicyConfig
from agent.relay.limits import Limits
from agent.workload import QoSClass
from devtools.criclient import CRIClient, CRIError
from devtools.fake_runtime import FaultyRuntime, serve_memory_runtime
from devtools.fakesysfs import write_shape
from tests.waiting import LIMIT_S, wait_until
from topology.cpuset import CPUSet

RESERVED = "0,40"
EVENTS = "/runtime.v1.RuntimeService/GetContainerEvents"
RT = "/runtime.v1.RuntimeService/"
IMG = "/runtime.v1.ImageService/"


@dataclass
class Running:
    daemon: Daemon
    listen: Path
    runtime: FaultyRuntime

    def scrape(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """Every sample of the metrics endpoint: (name, sorted labels) -> value."""
        assert self.daemon.metrics_server is not None
        host, port = self.daemon.metrics_server.address
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as reply:
            text = reply.read().decode()
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }


@pytest.fixture(scope="module")
def sysfs() -> Iterator[Path]:
    # Written once, in memory when possible: thousands of small files.
    base = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(prefix="na-obs-sysfs-", dir=base) as d:
        yield write_shape("xeon-2s-2numa", Path(d))


def start_daemon(
    sockdir: Path, tmp_path: Path, sysfs: Path, metrics: str, **keys: Any
) -> Iterator[Running]:
    rt_path = sockdir / "rt.sock"
    server, runtime = serve_memory_runtime(rt_path)
    config = AgentConfig(
        runtime_endpoint=f"unix://{rt_path}",
        listen=str(sockdir / "agent" / "numa-agent.sock"),
        state_dir=str(tmp_path / "state"),
        sysfs_root=str(sysfs),
        metrics_address=metrics,
        feature_file="",  # never the host's NFD directory
        policy=PolicyConfig.from_mapping({"reserved_cpus": RESERVED}),
        **keys,
    )
    daemon = Daemon(config, runtime_wait_s=5)
    daemon.start()
    try:
        yield Running(daemon, sockdir / "agent" / "numa-agent.sock", runtime)
    finally:
        daemon.stop(0)
        server.stop(None)


@pytest.fixture
def running(sockdir: Path, tmp_path: Path, sysfs: Path) -> Iterator[Running]:
    # Port 0: the kernel picks a free one (the config file insists on 1-65535).
    yield from start_daemon(sockdir, tmp_path, sysfs, "127.0.0.1:0")


def pod(client: CRIClient, name: str, milli: int, qos: QoSClass) -> str:
    config = kubelet_pod_config(name, "default", str(uuid.uuid4()), qos=qos)
    sandbox = client.run_pod_sandbox(config)
    limit = milli if qos is QoSClass.GUARANTEED else 0
    container = kubelet_container_config(config, "app", milli, limit, 1 << 30)
    return client.create_container(sandbox, container, config)


def test_metrics_count_calls_decisions_refusals_and_capacity(running: Running) -> None:
    with CRIClient(str(running.listen), timeout=5) as client:
        for _ in range(3):
            client.version()
        db = pod(client, "db", 4000, QoSClass.GUARANTEED)
        pod(client, "web", 500, QoSClass.BURSTABLE)
        with pytest.raises(CRIError) as err:
            pod(client, "huge", 79000, QoSClass.GUARANTEED)
        assert err.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        db_cpus = CPUSet.parse(client.container_status(db).status.resources.linux.cpuset_cpus)
    assert running.daemon.node is not None and running.daemon.node.wait_for_updates(LIMIT_S)

    m = running.scrape()
    calls = "numa_agent_cri_request_duration_seconds_count"
    assert m[calls, (("code", "OK"), ("method", "RuntimeService/Version"))] == 3
    assert m[calls, (("code", "OK"), ("method", "RuntimeService/RunPodSandbox"))] == 3
    assert m[calls, (("code", "OK"), ("method", "RuntimeService/CreateContainer"))] == 2
    refused = (("code", "RESOURCE_EXHAUSTED"), ("method", "RuntimeService/CreateContainer"))
    assert m[calls, refused] == 1
    # Three policy calls (two placed, one refused); one refusal, by its reason.
    assert m["numa_agent_placement_decision_seconds_count", ()] == 3
    assert m["numa_agent_placement_refusals_total", (("reason", "resource_exhausted"),)] == 1
    assert m["numa_agent_placement_refusals_total", (("reason", "invalid_argument"),)] == 0

    def pool(name: str, pool_name: str) -> float:
        return m[f"numa_agent_pool_{name}", (("pool", pool_name),)]

    # 80 CPUs, 2 reserved, 4 exclusive: 74 left to share and to take exclusively.
    assert pool("exclusive_cpus", "machine") == 4 == len(db_cpus)
    assert pool("exclusive_free_cpus", "machine") == 74
    assert pool("shared_cpus", "machine") == 74
    assert pool("shared_milli_cpus_used", "machine") == 500
    assert sum(pool("exclusive_cpus", f"numa{n}") for n in range(4)) == 4
    assert (
        sum(pool("containers", p) for p in ("machine", "socket0", "socket1"))
        + sum(pool("containers", f"numa{n}") for n in range(4))
        == 2
    )
    assert m["numa_agent_pending_updates", ()] == 0
    assert m["numa_agent_process_cpu_seconds_total", ()] > 0
    assert m["numa_agent_process_resident_memory_bytes", ()] > 10 << 20


def test_streaming_calls_are_counted_when_they_end(running: Running) -> None:
    with grpc.insecure_channel(f"unix://{running.listen}") as channel:
        stream = channel.unary_stream(EVENTS)(b"", timeout=0.3)
        with pytest.raises(grpc.RpcError) as err:
            list(stream)
        assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    key = "numa_agent_cri_request_duration_seconds_count"

    def counted() -> dict[Any, float]:
        return {
            labels: v
            for (name, labels), v in running.scrape().items()
            if name == key and ("method", "RuntimeService/GetContainerEvents") in labels
        }

    # The server side ends a moment after the client gave up.
    wait_until(counted, what="the stream to be counted")
    assert sum(counted().values()) == 1, counted()
    (labels,) = counted()
    assert dict(labels)["code"] in ("DEADLINE_EXCEEDED", "CANCELLED")


def test_metrics_are_off_by_default(sockdir: Path, tmp_path: Path, sysfs: Path) -> None:
    for running in start_daemon(sockdir, tmp_path, sysfs, ""):
        assert running.daemon.metrics is None and running.daemon.metrics_server is None


def test_status_over_the_introspection_socket(
    running: Running, capsys: pytest.CaptureFixture[str]
) -> None:
    path = status_socket_path(str(running.listen))
    assert path == running.listen.with_name("numa-agent-status.sock")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with CRIClient(str(running.listen), timeout=5) as client:
        db = pod(client, "db", 4000, QoSClass.GUARANTEED)
        web = pod(client, "web", 1500, QoSClass.BURSTABLE)
    assert running.daemon.node is not None
    placements = {p.container_id: p for p in running.daemon.node.placements()}

    assert main(["status", "--listen", str(running.listen), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["agent"]["runtime_endpoint"] == running.daemon.config.runtime_endpoint
    assert doc["agent"]["rss_bytes"] > 0 and doc["agent"]["pending_updates"] >= 0
    assert doc["machine"]["reserved_cpus"] == RESERVED
    pools = {p["name"]: p for p in doc["pools"]}
    assert next(iter(pools)) == "machine" and pools["numa0"]["parent"] == "socket0"
    listed = {c["container_id"]: (p["name"], c) for p in doc["pools"] for c in p["containers"]}
    assert set(listed) == {db, web}
    for cid, (pool_name, container) in listed.items():
        assert pool_name == placements[cid].pool
        assert container["cpuset_cpus"] == placements[cid].cpuset_cpus
    db_pool = pools[placements[db].pool]
    assert db_pool["exclusive_cpus"] == placements[db].cpuset_cpus
    assert pools["machine"]["exclusive_free"] == 74
    assert pools["machine"]["shared_milli_used"] == 1500
    assert pools["machine"]["shared_milli_free"] == 74_000 - 1500

    assert main(["status", "--listen", str(running.listen)]) == 0
    text = capsys.readouterr().out
    assert f"runtime {running.daemon.config.runtime_endpoint}" in text
    assert "2 containers placed" in text
    db_line = next(line for line in text.splitlines() if "default/db/app" in line)
    assert db_line.split()[:3] == ["exclusive", "cpus", placements[db].cpuset_cpus]
    assert "machine  cpus 0-79" in text and "exclusive 4 used, 74 free" in text


def test_status_without_an_agent_says_so(sockdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--listen", str(sockdir / "numa-agent.sock")]) == 1
    err = capsys.readouterr().err
    assert "no agent answers on" in err and "numa-agent-status.sock" in err


def test_documented_metrics_are_the_served_ones(running: Running) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "observability.md").read_text()
    documented = set(re.findall(r"^\| `(numa_agent_\w+)` \|", doc, re.MULTILINE))
    with CRIClient(str(running.listen), timeout=5) as client:
        client.version()
        pod(client, "db", 1000, QoSClass.GUARANTEED)
    served = set()
    for name, _labels in running.scrape():
        if name.endswith("_created"):
            continue  # prometheus_client's creation stamps, not metrics of ours
        for suffix in ("_bucket", "_count", "_sum"):
            name = name.removesuffix(suffix)
        served.add(name)
    assert documented == served


def test_the_relay_limits_come_from_the_configuration(
    sockdir: Path, tmp_path: Path, sysfs: Path
) -> None:
    for running in start_daemon(sockdir, tmp_path, sysfs, "", relay_passthrough_limit=1):
        relay = running.daemon.relay
        assert relay is not None
        assert relay.limits == Limits(passthrough=1)
        gate = running.runtime.hold_next("PullImage")
        with grpc.insecure_channel(f"unix://{running.listen}") as channel:
            held = channel.unary_unary(IMG + "PullImage").future(b"", timeout=LIMIT_S * 4)
            try:
                assert gate.entered.wait(LIMIT_S)
                with pytest.raises(grpc.RpcError) as err:
                    channel.unary_unary(RT + "Version")(b"", timeout=LIMIT_S)
                assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "1 pass-through calls in flight" in err.value.details()
            finally:
                gate.release.set()
                held.cancel()
