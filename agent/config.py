"""The agent's configuration: one YAML file, every key also a command-line flag.

Flags win over the file, the file over the defaults. Validation happens once,
here, with errors that name the key and the bad value; unknown keys are errors.
Policy keys (reserved CPUs, pinning, colocation) are handed to PolicyConfig.
"""

from __future__ import annotations

import dataclasses
import grp
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.labels.sources import FILE_PREFIX
from agent.policy.config import ConfigError, PolicyConfig
from agent.relay.endpoint import Endpoint, EndpointError
from agent.relay.limits import Limits
from agent.yamlfile import YamlFileError, read_yaml_file

DEFAULT_CONFIG_PATH = "/etc/numa-agent/config.yaml"
# Node Feature Discovery's local feature source reads every file in this directory.
DEFAULT_FEATURE_FILE = "/etc/kubernetes/node-feature-discovery/features.d/numa-agent"
# Plugins are called in ascending index order: late, so plugins that add devices or
# mounts come first, and the cpusets this one sets are what the container gets.
DEFAULT_NRI_PLUGIN_INDEX = "90"
LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")
_RELAY = Limits()  # the relay's own defaults, so that there is one place for them

__all__ = ["AgentConfig", "ConfigError", "config_from_mapping", "resolve_config"]


@dataclass(frozen=True, slots=True)
class AgentConfig:
    runtime_endpoint: str = "unix:///run/containerd/containerd.sock"
    image_endpoint: str = ""  # empty: same as runtime_endpoint
    listen: str = "unix:///var/run/numa-agent/numa-agent.sock"
    socket_group: str = ""  # empty: root's group
    state_dir: str = "/var/lib/numa-agent"
    sysfs_root: str = "/sys"
    log_level: str = "info"
    log_format: str = "text"
    metrics_address: str = ""  # empty: metrics off
    reconcile_period: float = 10.0  # seconds between checks of the kernel's view; 0: off
    update_timeout: float = 5.0  # deadline of each cpuset update the agent sends
    feature_file: str = DEFAULT_FEATURE_FILE  # empty: no feature file
    physical_host_id: str = ""  # the id itself, or file:/path; empty: DMI on hardware
    label_salt: str = ""  # key of the physical-host label's hash
    # Calls the relay holds at once, per kind (agent/relay/limits.py says why each).
    relay_passthrough_limit: int = _RELAY.passthrough
    relay_placement_limit: int = _RELAY.placement
    relay_stream_limit: int = _RELAY.streams
    relay_waiting_limit: int = _RELAY.waiting
    nri_socket: str = ""  # the runtime's NRI socket; empty: NRI off (the CRI proxy only)
    nri_plugin_index: str = DEFAULT_NRI_PLUGIN_INDEX
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    # Not a key: in NRI mode the CRI socket is served only when `listen` was given.
    serve_cri: bool = True

    @property
    def effective_image_endpoint(self) -> str:
        return self.image_endpoint or self.runtime_endpoint

    @property
    def relay_limits(self) -> Limits:
        return Limits(
            waiting=self.relay_waiting_limit,
            passthrough=self.relay_passthrough_limit,
            placement=self.relay_placement_limit,
            streams=self.relay_stream_limit,
        )


# Documentation of every key, in the order `numa-agent config --defaults` prints them.
AGENT_KEYS: dict[str, str] = {
    "runtime_endpoint": "CRI endpoint of the real runtime (unix:///path or a bare path)",
    "image_endpoint": "CRI image service endpoint; empty = the runtime endpoint",
    "listen": "socket kubelet connects to (--container-runtime-endpoint)",
    "socket_group": "group owning the listen socket (mode 0660); empty = root",
    "state_dir": "where the agent keeps its state file",
    "sysfs_root": "sysfs to read the machine's topology from",
    "log_level": "debug, info, warning or error",
    "log_format": "text or json",
    "metrics_address": "host:port of the Prometheus endpoint; empty = off",
    "reconcile_period": "seconds between checks that the kernel enforces the agent's "
    "cpusets (repairs what a runtime dropped); 0 = off",
    "update_timeout": "seconds each cpuset update the agent sends may take before it is "
    "given up (its container's cpuset is then unknown and retried with back-off)",
    "feature_file": "node labels for Node Feature Discovery, rewritten on change; empty = off",
    "physical_host_id": "id of the physical machine (or file:/path); empty = DMI on hardware",
    "label_salt": "secret mixed into the physical-host label's hash",
    "relay_passthrough_limit": "calls without a hook (Version, ExecSync, PullImage, ...) "
    "the relay holds at once; more are refused with RESOURCE_EXHAUSTED",
    "relay_placement_limit": "calls with a hook (CreateContainer, ListContainers, ...) "
    "the relay holds at once; more are refused with RESOURCE_EXHAUSTED",
    "relay_stream_limit": "server-streaming calls (GetContainerEvents, ...) the relay "
    "holds open at once; more are refused with RESOURCE_EXHAUSTED",
    "relay_waiting_limit": "calls the relay holds before their request message arrives; "
    "when full, the one waiting longest is cancelled",
    "nri_socket": "the runtime's NRI socket (e.g. /var/run/nri/nri.sock): run as an NRI "
    "plugin; empty = off (CRI proxy only)",
    "nri_plugin_index": "the NRI plugin's index, two digits (plugins run in ascending order)",
}
RELAY_LIMIT_KEYS = (
    "relay_passthrough_limit",
    "relay_placement_limit",
    "relay_stream_limit",
    "relay_waiting_limit",
)


def _check_str(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{key}: expected a string, got {value!r}")
    return value


def _seconds(key: str, value: Any) -> float:
    """A duration in seconds: a number, or a numeric string from the command line."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ConfigError(f"{key}: expected a number of seconds, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ConfigError(f"{key}: expected a number of seconds >= 0, got {value!r}")
    if value == float("inf"):
        raise ConfigError(f"{key}: expected a finite number of seconds, got {value!r}")
    return float(value)


def _count(key: str, value: Any) -> int:
    """A whole number >= 1: an integer, or a string of digits from the command line."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{key}: expected a whole number >= 1, got {value!r}")
    return value


def _validate_agent_key(key: str, value: Any) -> Any:
    if key == "reconcile_period":
        return _seconds(key, value)
    if key in RELAY_LIMIT_KEYS:
        return _count(key, value)
    if key == "update_timeout":
        seconds = _seconds(key, value)
        if seconds <= 0:
            raise ConfigError(f"{key}: expected a number of seconds > 0, got {value!r}")
        return seconds
    text = _check_str(key, value)
    if key in ("runtime_endpoint", "listen") and not text:
        raise ConfigError(f"{key}: must not be empty")
    if key in ("runtime_endpoint", "image_endpoint", "listen") and text:
        try:
            Endpoint.parse(text)  # the same parser the relay uses at start
        except EndpointError as err:
            raise ConfigError(f"{key}: {err}") from None
    if key == "nri_socket" and text and not Path(text).is_absolute():
        raise ConfigError(f"nri_socket: {text!r} is not an absolute path")
    if key == "nri_plugin_index" and not (len(text) == 2 and text.isdigit()):
        raise ConfigError(f"nri_plugin_index: {text!r} is not two digits (00 to 99)")
    if key == "log_level" and text not in LOG_LEVELS:
        raise ConfigError(f"log_level: {text!r} is not one of {', '.join(LOG_LEVELS)}")
    if key == "log_format" and text not in LOG_FORMATS:
        raise ConfigError(f"log_format: {text!r} is not one of {', '.join(LOG_FORMATS)}")
    if key == "metrics_address" and text:
        host, sep, port = text.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"metrics_address: {text!r} is not host:port")
    if key == "feature_file" and text:
        path = Path(text)
        if not path.is_absolute() or text.endswith("/"):
            raise ConfigError(f"feature_file: {text!r} is not an absolute file path")
        if path.name.startswith("."):
            raise ConfigError(
                f"feature_file: {text!r}: Node Feature Discovery ignores files whose name "
                "starts with '.'"
            )
    if (
        key == "physical_host_id"
        and text.startswith(FILE_PREFIX)
        and not Path(text.removeprefix(FILE_PREFIX)).is_absolute()
    ):
        raise ConfigError(f"physical_host_id: {text!r}: {FILE_PREFIX} needs an absolute path")
    if key == "socket_group" and text:
        try:
            grp.getgrnam(text)
        except KeyError:
            raise ConfigError(f"socket_group: no group named {text!r} on this host") from None
    return text


def config_from_mapping(data: Mapping[str, Any]) -> AgentConfig:
    """Build a validated AgentConfig from a flat mapping of file keys and flag values."""
    policy_keys = {f.name for f in dataclasses.fields(PolicyConfig)}
    agent_values: dict[str, Any] = {}
    policy_values: dict[str, Any] = {}
    for key, value in data.items():
        if not isinstance(key, str):
            raise ConfigError(f"configuration key {key!r} is not a string")
        if key in AGENT_KEYS:
            agent_values[key] = _validate_agent_key(key, value)
        elif key in policy_keys:
            policy_values[key] = value
        else:
            known = ", ".join(sorted([*AGENT_KEYS, *policy_keys]))
            raise ConfigError(f"unknown configuration key {key!r} (known keys: {known})")
    # NRI mode serves no CRI socket unless one was asked for.
    serve_cri = not agent_values.get("nri_socket") or "listen" in agent_values
    return AgentConfig(
        **agent_values, policy=PolicyConfig.from_mapping(policy_values), serve_cri=serve_cri
    )


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a config file into a flat mapping; a missing file is an error naming it."""
    try:
        data = read_yaml_file(path, "configuration file")
    except YamlFileError as err:
        raise ConfigError(str(err)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"configuration file {path}: expected a mapping of keys to values")
    return data


def resolve_config(config_path: str | Path | None, overrides: Mapping[str, Any]) -> AgentConfig:
    """File values (when a file is given or the default one exists), then flags on top.

    An explicitly named file must exist; the default path is optional.
    """
    values: dict[str, Any] = {}
    if config_path is not None:
        values.update(load_config_file(config_path))
    elif Path(DEFAULT_CONFIG_PATH).exists():
        values.update(load_config_file(DEFAULT_CONFIG_PATH))
    values.update({k: v for k, v in overrides.items() if v is not None})
    return config_from_mapping(values)
