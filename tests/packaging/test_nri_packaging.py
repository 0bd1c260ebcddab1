"""NRI mode's shipping files agree with the code: the DaemonSet's and the example's
configs are valid NRI-mode configs (no CRI socket), every path they name is a host
mount, and the systemd drop-in runs the agent with the NRI socket."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import pytest
import yaml

from agent.config import DEFAULT_CONFIG_PATH, AgentConfig, config_from_mapping
from agent.relay.endpoint import Endpoint
from tests.packaging.helpers import ROOT, parse_unit, words

DOCS = list(yaml.safe_load_all((ROOT / "packaging/kubernetes/daemonset-nri.yaml").read_text()))
BY_KIND = {doc["kind"]: doc for doc in DOCS}
POD = BY_KIND["DaemonSet"]["spec"]["template"]["spec"]
(CONTAINER,) = POD["containers"]
CONFIG = config_from_mapping(yaml.safe_load(BY_KIND["ConfigMap"]["data"]["config.yaml"]))
DEFAULTS = AgentConfig()
EXAMPLE = config_from_mapping(yaml.safe_load((ROOT / "packaging/nri/config.yaml").read_text()))


def mount_for(container_path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    matches = [m for m in CONTAINER["volumeMounts"] if m["mountPath"] == container_path]
    assert len(matches) == 1, f"{container_path} is mounted {len(matches)} times"
    (volume,) = [v for v in POD["volumes"] if v["name"] == matches[0]["name"]]
    return matches[0], volume


def parent(path: str) -> str:
    return str(PurePosixPath(path).parent)


@pytest.mark.parametrize("config", [CONFIG, EXAMPLE], ids=["daemonset", "example"])
def test_the_configs_are_nri_mode_without_a_cri_socket(config: AgentConfig) -> None:
    assert config.nri_socket == "/var/run/nri/nri.sock"
    assert not config.serve_cri


@pytest.mark.parametrize(
    ("configured", "host", "read_only"),
    [
        (parent(CONFIG.nri_socket), "/var/run/nri", False),
        (parent(str(Endpoint.parse(CONFIG.runtime_endpoint).path)), "/run/containerd", False),
        # The status socket sits next to the (unserved) default CRI socket.
        (parent(str(Endpoint.parse(DEFAULTS.listen).path)), "/var/run/numa-agent", False),
        (CONFIG.state_dir, DEFAULTS.state_dir, False),
        (CONFIG.sysfs_root, DEFAULTS.sysfs_root, True),
    ],
    ids=["nri", "runtime", "status", "state", "sysfs"],
)
def test_configured_paths_are_host_mounts(configured: str, host: str, read_only: bool) -> None:
    mount, volume = mount_for(configured)
    assert volume["hostPath"]["path"] == host
    assert mount.get("readOnly", False) is read_only


def test_the_pod_sees_host_pids_for_the_reconcile() -> None:
    assert POD["hostPID"] is True


def test_config_comes_from_the_configmap_and_mounts_match_volumes() -> None:
    assert CONTAINER["args"] == ["run", "--config", DEFAULT_CONFIG_PATH]
    assert {m["name"] for m in CONTAINER["volumeMounts"]} == {v["name"] for v in POD["volumes"]}


def test_the_systemd_drop_in_runs_the_plugin() -> None:
    unit = parse_unit((ROOT / "packaging/nri/numa-agent-nri.conf").read_text())
    exec_start = words(unit, "Service", "ExecStart")
    assert "--nri-socket" in exec_start and "/var/run/nri/nri.sock" in exec_start
    assert words(unit, "Unit", "Before") == []
