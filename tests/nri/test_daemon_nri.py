"""`numa-agent run --nri-socket`: the daemon plugs the one node agent into the
runtime's NRI socket, serves no CRI socket unless asked, and reports through the
same status document; configuration keys are checked with clear errors."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent.config import AgentConfig, ConfigError, config_from_mapping, resolve_config
from agent.daemon import Daemon
from agent.workload import QoSClass
from devtools.fakesysfs import write_shape
from devtools.nri_runtime import NriRuntimeStandIn
from tests.nri.conftest import GIB, create_app, run_pod
from topology.cpuset import CPUSet


@pytest.fixture
def daemon_for(
    tmp_path: Path, sock_dir: Path
) -> Iterator[Callable[[NriRuntimeStandIn, bool], Daemon]]:
    daemons: list[Daemon] = []

    def make(standin: NriRuntimeStandIn, serve_cri: bool) -> Daemon:
        sysfs = write_shape("xeon-2s-2numa", tmp_path / "sysfs")
        config = dataclasses.replace(
            config_from_mapping(
                {
                    "nri_socket": standin.path,
                    "runtime_endpoint": f"unix://{sock_dir}/no-cri.sock",  # not there: pid via NRI
                    "state_dir": str(tmp_path / "state"),
                    "sysfs_root": str(sysfs),
                    "feature_file": "",
                    "reserved_cpus": "0,40",
                }
            ),
            listen=f"unix://{sock_dir}/agent.sock",
            serve_cri=serve_cri,
        )
        daemon = Daemon(config)
        daemon.start()
        daemons.append(daemon)
        return daemon

    yield make
    for daemon in daemons:
        daemon.stop()


def test_nri_mode_places_through_the_runtime_and_serves_no_cri_socket(
    standin: NriRuntimeStandIn,
    daemon_for: Callable[[NriRuntimeStandIn, bool], Daemon],
    sock_dir: Path,
) -> None:
    daemon = daemon_for(standin, False)
    assert standin.wait_ready(10)
    assert not (sock_dir / "agent.sock").exists()
    pod = run_pod(standin, "db", QoSClass.GUARANTEED)
    cid = create_app(standin, pod, 4000, 4000, GIB, start=False)
    cpus = CPUSet.parse(standin.cpus(cid))
    assert len(cpus) == 4 and not cpus & CPUSet.parse("0,40")  # reserved stay out
    assert daemon.node is not None
    assert [p.container_id for p in daemon.node.placements()] == [cid]
    assert daemon.status()["agent"]["pending_updates"] == 0


def test_nri_mode_with_listen_also_relays(
    standin: NriRuntimeStandIn,
    daemon_for: Callable[[NriRuntimeStandIn, bool], Daemon],
    sock_dir: Path,
) -> None:
    daemon_for(standin, True)
    assert (sock_dir / "agent.sock").exists()


def test_the_flag_and_key_select_nri_mode_and_drop_the_cri_socket() -> None:
    config = resolve_config(None, {"nri_socket": "/var/run/nri/nri.sock"})
    assert config.nri_socket == "/var/run/nri/nri.sock" and not config.serve_cri
    assert config.nri_plugin_index == "90"
    both = resolve_config(None, {"nri_socket": "/var/run/nri/nri.sock", "listen": "/tmp/x.sock"})
    assert both.serve_cri
    assert AgentConfig().serve_cri and not AgentConfig().nri_socket


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"nri_socket": "nri.sock"}, "nri_socket: 'nri.sock' is not an absolute path"),
        ({"nri_plugin_index": "7"}, "nri_plugin_index: '7' is not two digits"),
        ({"nri_plugin_index": "1a"}, "nri_plugin_index: '1a' is not two digits"),
    ],
)
def test_bad_nri_keys_are_refused_naming_the_key(values: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_mapping(values)
