"""The systemd unit and the kubelet drop-in: systemd accepts them, and what they
say (paths, ordering, readiness, hardening) agrees with the agent's own defaults."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import pytest

from agent.config import DEFAULT_CONFIG_PATH, AgentConfig
from agent.relay.endpoint import Endpoint
from tests.packaging.helpers import ROOT, load_script, parse_unit, require, single, words

UNIT_TEXT = (ROOT / "systemd/numa-agent.service").read_text()
DROPIN_TEXT = (ROOT / "systemd/kubelet-numa-agent.conf").read_text()
UNIT = parse_unit(UNIT_TEXT)
DROPIN = parse_unit(DROPIN_TEXT)
PREFIX = load_script("build_deb").PREFIX


def run_path(path: str) -> PurePosixPath:
    """/var/run is a symlink to /run on every systemd host."""
    p = PurePosixPath(path)
    if p.parts[:3] == ("/", "var", "run"):
        return PurePosixPath("/run", *p.parts[3:])
    return p


def fake_executable(tmp_path: Path) -> Path:
    exe = tmp_path / "numa-agent"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    return exe


def verify(path: Path) -> subprocess.CompletedProcess[str]:
    require([] if shutil.which("systemd-analyze") else ["systemd-analyze"], "unit verification")
    return subprocess.run(
        ["systemd-analyze", "--man=no", "verify", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )


def unit_at(tmp_path: Path, text: str) -> Path:
    """The unit with ExecStart pointing at a stand-in (the package is not installed here)."""
    path = tmp_path / "numa-agent.service"
    exe = fake_executable(tmp_path)
    path.write_text(text.replace(f"{PREFIX}/bin/numa-agent", str(exe)))
    return path


Edit = Callable[[str], str]


@pytest.mark.parametrize(
    ("edit", "clean"),
    [
        (lambda text: text, True),
        # Controls: the check sees a misspelt key and a bad value.
        (lambda text: text.replace("ProtectSystem=", "ProtectSystm="), False),
        (lambda text: text.replace("Restart=always", "Restart=sometimes"), False),
    ],
    ids=["as-shipped", "misspelt-key", "bad-value"],
)
def test_systemd_accepts_the_unit(tmp_path: Path, edit: Edit, clean: bool) -> None:
    result = verify(unit_at(tmp_path, edit(UNIT_TEXT)))
    assert result.returncode == 0, result.stderr
    assert (result.stderr == "") is clean, result.stderr


@pytest.mark.parametrize(
    ("edit", "clean"),
    [
        (lambda text: text, True),
        (lambda text: text.replace("After=numa-agent", "Aftre=numa-agent"), False),
    ],
    ids=["as-shipped", "misspelt-key"],
)
def test_systemd_accepts_the_kubelet_dropin(tmp_path: Path, edit: Edit, clean: bool) -> None:
    # kubeadm's kubelet unit in miniature: its ExecStart ends with $KUBELET_EXTRA_ARGS.
    exe = fake_executable(tmp_path)
    (tmp_path / "kubelet.service").write_text(f"[Service]\nExecStart={exe} $KUBELET_EXTRA_ARGS\n")
    unit_at(tmp_path, UNIT_TEXT)  # Requires= must find numa-agent.service
    dropins = tmp_path / "kubelet.service.d"
    dropins.mkdir()
    (dropins / "20-numa-agent.conf").write_text(edit(DROPIN_TEXT))
    result = verify(tmp_path / "kubelet.service")
    assert result.returncode == 0, result.stderr
    assert (result.stderr == "") is clean, result.stderr


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        # Readiness: "started" means the socket serves (agent/daemon.py sends READY=1).
        ("Service", "Type", "notify"),
        ("Service", "NotifyAccess", "main"),
        ("Service", "Restart", "always"),
        ("Service", "ExecReload", "/bin/kill -HUP $MAINPID"),
        ("Unit", "StartLimitIntervalSec", "0"),
        ("Install", "WantedBy", "multi-user.target"),
        ("Service", "ProtectSystem", "strict"),
        ("Service", "ProtectHome", "yes"),
        ("Service", "PrivateTmp", "yes"),
        ("Service", "NoNewPrivileges", "yes"),
        ("Service", "CapabilityBoundingSet", "CAP_CHOWN"),
    ],
)
def test_unit_setting(section: str, key: str, value: str) -> None:
    assert single(UNIT, section, key) == value


def test_unit_runs_the_packaged_agent_with_the_default_config() -> None:
    argv = shlex.split(single(UNIT, "Service", "ExecStart"))
    assert argv == [f"{PREFIX}/bin/numa-agent", "run", "--config", DEFAULT_CONFIG_PATH]


def test_unit_orders_runtime_agent_kubelet() -> None:
    assert {"containerd.service", "crio.service"} <= set(words(UNIT, "Unit", "After"))
    assert words(UNIT, "Unit", "Before") == ["kubelet.service"]
    # The agent must not pull a runtime in: a node runs one of the two.
    assert "Requires" not in UNIT["Unit"]
    assert "Wants" not in UNIT["Unit"]


def test_writable_directories_are_the_configured_ones() -> None:
    """ProtectSystem=strict leaves only these writable: they must be where the agent writes."""
    defaults = AgentConfig()
    assert PurePosixPath("/var/lib", single(UNIT, "Service", "StateDirectory")) == PurePosixPath(
        defaults.state_dir
    )
    socket_dir = run_path(str(Endpoint.parse(defaults.listen).path)).parent
    assert PurePosixPath("/run", single(UNIT, "Service", "RuntimeDirectory")) == socket_dir


def test_the_feature_file_directory_is_created_and_writable() -> None:
    """/etc is read-only under ProtectSystem=strict: the feature file's directory is not."""
    directory = PurePosixPath(AgentConfig().feature_file).parent
    created = PurePosixPath("/etc", single(UNIT, "Service", "ConfigurationDirectory"))
    assert created == directory
    assert PurePosixPath(single(UNIT, "Service", "ReadWritePaths")) == directory


def test_address_families_cover_sockets_and_metrics() -> None:
    families = set(words(UNIT, "Service", "RestrictAddressFamilies"))
    # AF_UNIX: kubelet, the runtime, sd_notify. TCP: metrics_address is host:port.
    assert families == {"AF_UNIX", "AF_INET", "AF_INET6"}
    assert "metrics_address" in AgentConfig.__dataclass_fields__


def test_dropin_points_kubelet_at_the_agent() -> None:
    assert words(DROPIN, "Unit", "Requires") == ["numa-agent.service"]
    assert words(DROPIN, "Unit", "After") == ["numa-agent.service"]
    (assignment,) = shlex.split(single(DROPIN, "Service", "Environment"))
    name, _, value = assignment.partition("=")
    assert name == "KUBELET_EXTRA_ARGS"
    assert shlex.split(value) == [
        f"--container-runtime-endpoint={AgentConfig().listen}",
        "--cpu-manager-policy=none",
    ]
    # The config-file alternative in the comment names the same socket.
    assert f"containerRuntimeEndpoint: {AgentConfig().listen}" in DROPIN_TEXT
