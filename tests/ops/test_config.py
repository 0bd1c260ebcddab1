"""Configuration: file + flags, validation naming the key, the commented defaults."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agent.cli import main
from agent.commands.config import render_config
from agent.config import AgentConfig, ConfigError, config_from_mapping, resolve_config
from agent.relay.limits import Limits
from topology.cpuset import CPUSet


def test_defaults_file_round_trips_to_the_defaults() -> None:
    text = render_config(AgentConfig())
    assert config_from_mapping(yaml.safe_load(text)) == AgentConfig()
    assert text.count("\n# ") >= 10  # every key commented


def test_flags_win_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("state_dir: /srv/state\nreserved_cpus: '0,40'\nlog_level: debug\n")
    config = resolve_config(path, {"log_level": "warning", "pin_memory": False})
    assert config.state_dir == "/srv/state"
    assert config.log_level == "warning"
    assert config.policy.reserved_cpus == CPUSet.parse("0,40")
    assert config.policy.pin_memory is False
    assert config.effective_image_endpoint == config.runtime_endpoint


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"listen_socket": "/x"}, "unknown configuration key 'listen_socket'"),
        ({"log_level": "loud"}, "log_level: 'loud' is not one of"),
        ({"log_format": "xml"}, "log_format: 'xml' is not one of"),
        ({"metrics_address": "9464"}, "metrics_address: '9464' is not host:port"),
        ({"runtime_endpoint": "tcp://1.2.3.4:1"}, "runtime_endpoint: endpoint"),
        ({"runtime_endpoint": ""}, "runtime_endpoint: must not be empty"),
        # Relative after unix://: refused here, not at start (one parser for both).
        ({"listen": "unix://run/x.sock"}, "listen: endpoint 'unix://run/x.sock': after unix://"),
        ({"image_endpoint": "unix://x.sock"}, "image_endpoint: endpoint 'unix://x.sock'"),
        ({"state_dir": 5}, "state_dir: expected a string, got 5"),
        ({"reserved_cpus": "3-1"}, "reserved_cpus"),
        ({"pin_cpus": "yes"}, "pin_cpus: expected true or false"),
        ({"socket_group": "no-such-group-xyz"}, "socket_group: no group named"),
        ({"relay_stream_limit": 0}, "relay_stream_limit: expected a whole number >= 1, got 0"),
        ({"relay_waiting_limit": "many"}, "relay_waiting_limit: expected a whole number >= 1"),
        ({"relay_placement_limit": True}, "relay_placement_limit: expected a whole number"),
        ({"relay_passthrough_limit": 2.5}, "relay_passthrough_limit: expected a whole number"),
    ],
)
def test_bad_values_name_the_key(data: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        config_from_mapping(data)


def test_bad_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("a: [")
    with pytest.raises(ConfigError, match=str(path)):
        resolve_config(path, {})
    with pytest.raises(ConfigError, match="cannot read configuration file"):
        resolve_config(tmp_path / "missing.yaml", {})
    path.write_text("- 1\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        resolve_config(path, {})


def test_config_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "--defaults"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["listen"].endswith("numa-agent.sock")
    path = tmp_path / "c.yaml"
    path.write_text("reserved_namespaces: [kube-system, monitoring]\n")
    assert main(["config", "--config", str(path), "--no-pin-cpus", "--colocate-weight", "3"]) == 0
    effective = yaml.safe_load(capsys.readouterr().out)
    assert effective["reserved_namespaces"] == ["kube-system", "monitoring"]
    assert effective["pin_cpus"] is False and effective["colocate_weight"] == 3
    path.write_text("colour: blue\n")
    assert main(["config", "--config", str(path)]) == 2
    assert "unknown configuration key 'colour'" in capsys.readouterr().err


def test_the_relay_limits_are_keys_with_the_relays_defaults(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert AgentConfig().relay_limits == Limits()
    assert main(["config", "--defaults"]) == 0
    defaults = yaml.safe_load(capsys.readouterr().out)
    assert [defaults[f"relay_{kind}_limit"] for kind in ("passthrough", "placement", "stream")] == [
        256,
        128,
        256,
    ]
    assert defaults["relay_waiting_limit"] == 64
    flags = ["--relay-passthrough-limit", "3", "--relay-stream-limit", "5"]
    assert main(["config", *flags]) == 0
    effective = config_from_mapping(yaml.safe_load(capsys.readouterr().out))
    assert effective.relay_limits == Limits(passthrough=3, streams=5)
