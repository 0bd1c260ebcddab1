"""A running daemon (in-process, in front of the in-memory runtime over gRPC) keeps the
feature file: written at start, rewritten on reload only when its text changes; and
`numa-agent labels --format noderesourcetopology` asks it what is available."""

from __future__ import annotations

import logging
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from agent.cli import main
from agent.config import resolve_config
from agent.daemon import Daemon
from agent.kubelet import kubelet_container_config, kubelet_pod_config
from agent.labels.nfd import parse_feature_file
from agent.labels.node import PHYSICAL_HOST
from agent.workload import QoSClass
from devtools.criclient import CRIClient
from devtools.fake_runtime import serve_memory_runtime
from topology.cpuset import CPUSet
from topology.tree import Machine

SHAPE = "xeon-2s-2numa"


@dataclass
class Running:
    daemon: Daemon
    config: Path
    feature: Path
    listen: Path

    def write_config(self, **keys: str) -> None:
        self.config.write_text(yaml.safe_dump({"feature_file": str(self.feature), **keys}))


@pytest.fixture
def running(tmp_path: Path, shape_root: Callable[[str], Path]) -> Iterator[Running]:
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))  # reload() sets the process's logging up
    with tempfile.TemporaryDirectory(prefix="na-lbl-", dir="/tmp") as short:
        sockets = Path(short)
        server, _ = serve_memory_runtime(sockets / "rt.sock")
        config = tmp_path / "config.yaml"
        feature = tmp_path / "nfd/features.d/numa-agent"
        listen = sockets / "agent" / "numa-agent.sock"
        flags = {
            "runtime_endpoint": f"unix://{sockets / 'rt.sock'}",
            "listen": str(listen),
            "state_dir": str(tmp_path / "state"),
            "sysfs_root": str(shape_root(SHAPE)),
            "reserved_cpus": "0,40",
        }
        config.write_text(yaml.safe_dump({"feature_file": str(feature), "label_salt": "first"}))
        daemon = Daemon(resolve_config(config, flags), str(config), flags, runtime_wait_s=5)
        daemon.start()
        try:
            yield Running(daemon, config, feature, listen)
        finally:
            daemon.stop(0)
            server.stop(None)
            root.setLevel(saved[0])
            root.handlers[:] = saved[1]


def stat_of(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_ino, st.st_mtime_ns


def test_written_at_start_and_rewritten_only_on_change(running: Running, tmp_path: Path) -> None:
    labels = parse_feature_file(running.feature.read_text())
    assert labels["numa-agent.io/cpus"] == "80" and labels["numa-agent.io/virtual"] == "false"
    first_host = labels[PHYSICAL_HOST]
    before = stat_of(running.feature)

    running.daemon.reload()  # SIGHUP with the same file: same text, not touched
    assert stat_of(running.feature) == before

    running.write_config(label_salt="second")
    running.daemon.reload()
    after = parse_feature_file(running.feature.read_text())
    assert after[PHYSICAL_HOST] != first_host
    assert stat_of(running.feature)[0] != before[0]  # replaced by a rename
    assert {k: v for k, v in after.items() if k != PHYSICAL_HOST} == {
        k: v for k, v in labels.items() if k != PHYSICAL_HOST
    }

    # The provider's id, from a file re-read on reload.
    host_file = tmp_path / "host-id"
    host_file.write_text("host-a\n")
    running.write_config(label_salt="second", physical_host_id=f"file:{host_file}")
    running.daemon.reload()
    host_a = parse_feature_file(running.feature.read_text())[PHYSICAL_HOST]
    host_file.write_text("host-b\n")
    running.daemon.reload()
    host_b = parse_feature_file(running.feature.read_text())[PHYSICAL_HOST]
    assert len({first_host, after[PHYSICAL_HOST], host_a, host_b}) == 4

    # Turned off: the file the agent wrote goes.
    running.write_config(feature_file="")
    running.config.write_text("feature_file: ''\n")
    running.daemon.reload()
    assert not running.feature.exists()


def test_a_bad_reload_keeps_the_file(running: Running) -> None:
    before = (stat_of(running.feature), running.feature.read_text())
    running.config.write_text("label_salt: 5\n")  # not a string: refused, old config stays
    running.daemon.reload()
    assert (stat_of(running.feature), running.feature.read_text()) == before


def test_noderesourcetopology_counts_what_the_agent_placed(
    running: Running, shape_machine: Callable[[str], Machine], capsys: pytest.CaptureFixture[str]
) -> None:
    with CRIClient(str(running.listen), timeout=5) as client:
        config = kubelet_pod_config("db", "default", str(uuid.uuid4()), qos=QoSClass.GUARANTEED)
        sandbox = client.run_pod_sandbox(config)
        ctr = kubelet_container_config(config, "app", 4000, 4000, 1 << 30)
        db = client.create_container(sandbox, ctr, config)
        cpus = CPUSet.parse(client.container_status(db).status.resources.linux.cpuset_cpus)
    machine = shape_machine(SHAPE)
    (home,) = [n.id for n in machine.iter_numa_nodes() if cpus.is_subset(n.cpus)]

    argv = ["labels", "--format", "noderesourcetopology", "--node-name", "w1"]
    argv += ["--config", str(running.config), "--listen", str(running.listen)]
    argv += ["--sysfs-root", str(running.daemon.config.sysfs_root), "--reserved-cpus", "0,40"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert err == ""
    zones = {
        z["name"]: {r["name"]: r for r in z["resources"]} for z in yaml.safe_load(out)["zones"]
    }
    for node in machine.iter_numa_nodes():
        cpu = zones[f"node-{node.id}"]["cpu"]
        taken = 4 if node.id == home else 0
        assert int(cpu["available"]) == int(cpu["allocatable"]) - taken
        memory = zones[f"node-{node.id}"]["memory"]
        used = (1 << 30) if node.id == home else 0
        assert int(memory["available"].removesuffix("Ki")) * 1024 == node.memory_bytes - used

    # Without the agent: available = allocatable, and stderr says why.
    argv[argv.index("--listen") + 1] = str(running.listen.with_name("gone.sock"))
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "no agent answers on" in err and "available = allocatable" in err
    for zone in yaml.safe_load(out)["zones"]:
        for resource in zone["resources"]:
            assert resource["available"] == resource["allocatable"]
