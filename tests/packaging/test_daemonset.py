"""The DaemonSet manifest agrees with the code: its config is valid, every path the
config names is mounted from the host path the agent's defaults use."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import pytest
import yaml

from agent.config import DEFAULT_CONFIG_PATH, AgentConfig, config_from_mapping
from agent.relay.endpoint import Endpoint
from tests.packaging.helpers import ROOT, parse_unit, words

DOCS = list(yaml.safe_load_all((ROOT / "packaging/kubernetes/daemonset.yaml").read_text()))
BY_KIND = {doc["kind"]: doc for doc in DOCS}
POD = BY_KIND["DaemonSet"]["spec"]["template"]["spec"]
(CONTAINER,) = POD["containers"]
CONFIGMAP = BY_KIND["ConfigMap"]
CONFIG = config_from_mapping(yaml.safe_load(CONFIGMAP["data"]["config.yaml"]))
DEFAULTS = AgentConfig()


def mount_for(container_path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The volumeMount whose mountPath is `container_path`, and its volume."""
    matches = [m for m in CONTAINER["volumeMounts"] if m["mountPath"] == container_path]
    assert len(matches) == 1, f"{container_path} is mounted {len(matches)} times"
    (volume,) = [v for v in POD["volumes"] if v["name"] == matches[0]["name"]]
    return matches[0], volume


def socket_dir(endpoint: str) -> str:
    return str(PurePosixPath(Endpoint.parse(endpoint).path).parent)


def test_both_objects_live_in_kube_system() -> None:
    assert sorted(BY_KIND) == ["ConfigMap", "DaemonSet"]
    assert {doc["metadata"]["namespace"] for doc in DOCS} == {"kube-system"}


@pytest.mark.parametrize(
    ("configured", "host", "read_only"),
    [
        # The agent's socket must be where kubelet's flag (and the default) says.
        (socket_dir(CONFIG.listen), socket_dir(DEFAULTS.listen), False),
        (socket_dir(CONFIG.runtime_endpoint), socket_dir(DEFAULTS.runtime_endpoint), False),
        (CONFIG.state_dir, DEFAULTS.state_dir, False),
        (CONFIG.sysfs_root, DEFAULTS.sysfs_root, True),
        (
            str(PurePosixPath(CONFIG.feature_file).parent),
            str(PurePosixPath(DEFAULTS.feature_file).parent),
            False,
        ),
    ],
    ids=["listen", "runtime", "state", "sysfs", "feature-file"],
)
def test_configured_paths_are_host_mounts(configured: str, host: str, read_only: bool) -> None:
    mount, volume = mount_for(configured)
    assert volume["hostPath"]["path"] == host
    assert mount.get("readOnly", False) is read_only


def test_host_sysfs_is_not_mounted_over_the_containers_own() -> None:
    assert CONFIG.sysfs_root != "/sys"


def test_config_file_comes_from_the_configmap() -> None:
    assert CONTAINER["args"] == ["run", "--config", DEFAULT_CONFIG_PATH]
    path = PurePosixPath(DEFAULT_CONFIG_PATH)
    mount, volume = mount_for(str(path.parent))
    assert mount["readOnly"] is True
    assert volume["configMap"]["name"] == CONFIGMAP["metadata"]["name"]
    assert path.name in CONFIGMAP["data"]


def test_every_mount_has_a_volume_and_every_volume_a_mount() -> None:
    assert {m["name"] for m in CONTAINER["volumeMounts"]} == {v["name"] for v in POD["volumes"]}


def test_capabilities_match_the_systemd_unit() -> None:
    unit = parse_unit((ROOT / "systemd/numa-agent.service").read_text())
    caps = CONTAINER["securityContext"]["capabilities"]
    assert caps["drop"] == ["ALL"]
    assert ["CAP_" + c for c in caps["add"]] == words(unit, "Service", "CapabilityBoundingSet")
    assert CONTAINER["securityContext"]["privileged"] is False
