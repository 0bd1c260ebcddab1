"""The Debian package on this very host (root, CI): build, install, run, remove, purge.

The package is purged afterwards whatever happened, and the test refuses to run
where a numa-agent is already installed or has left config or state behind.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent import __version__
from agent.config import DEFAULT_CONFIG_PATH, AgentConfig
from tests.packaging.helpers import ROOT, load_script, require
from tests.packaging.readme import install_section, packaged_paths

pytestmark = pytest.mark.root

build_deb = load_script("build_deb")
UNIT = Path("/lib/systemd/system/numa-agent.service")
SYSTEMD_ETC = Path("/etc/systemd/system")
STATE_DIR = Path(AgentConfig().state_dir)
CONFIG_DIR = Path(DEFAULT_CONFIG_PATH).parent


def dpkg_status() -> str:
    result = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", "numa-agent"], capture_output=True, text=True
    )
    return result.stdout if result.returncode == 0 else "not-installed"


def purge() -> None:
    subprocess.run(["dpkg", "--purge", "numa-agent"], capture_output=True, check=False)


def prerequisites() -> list[str]:
    """What installing the package here needs, beyond building it (conftest.py)."""
    missing = [] if os.geteuid() == 0 else ["root"]
    return missing + ([] if shutil.which("dpkg") else ["dpkg"])


def systemd_links() -> set[Path]:
    return {p for p in SYSTEMD_ETC.rglob("numa-agent*") if p.is_symlink() or p.exists()}


@pytest.fixture(scope="module")
def deb(built_deb: Path) -> Iterator[Path]:
    require(prerequisites(), "the package test")
    leftovers = [str(p) for p in (CONFIG_DIR, STATE_DIR) if p.exists()]
    if dpkg_status() != "not-installed" or leftovers or systemd_links():
        pytest.fail(
            f"numa-agent is already on this host ({dpkg_status()}; {leftovers}); this test "
            "would purge it: run it on a clean host (CI) or `dpkg --purge numa-agent` first",
            pytrace=False,
        )
    try:
        yield built_deb
    finally:
        purge()


def agent(*args: str) -> str:
    return subprocess.run(
        ["/usr/bin/numa-agent", *args], capture_output=True, text=True, check=True
    ).stdout


def from_source(*args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "agent.cli", *args],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout


def test_install_run_remove_purge(deb: Path) -> None:
    subprocess.run(["dpkg", "--install", str(deb)], capture_output=True, check=True)
    assert dpkg_status() == "install ok installed"

    # The installed agent is the checkout's agent: same version, same view of the machine.
    assert agent("--version").strip() == f"numa-agent {__version__}"
    assert json.loads(agent("topology", "--json")) == json.loads(from_source("topology", "--json"))
    assert Path(DEFAULT_CONFIG_PATH).read_text() == from_source("config", "--defaults")
    agent("config", "--config", DEFAULT_CONFIG_PATH)  # the shipped file validates
    assert UNIT.read_text() == (ROOT / "systemd/numa-agent.service").read_text()
    page = gzip.decompress(Path("/usr/share/man/man8/numa-agent.8.gz").read_bytes()).decode()
    assert ".SS numa\\-agent run" in page
    if shutil.which("systemd-analyze"):  # with the real ExecStart in place
        check = subprocess.run(
            ["systemd-analyze", "--man=no", "verify", str(UNIT)], capture_output=True, text=True
        )
        assert (check.returncode, check.stderr) == (0, "")

    # Every installed path the README's install section names is there.
    for path in packaged_paths(install_section()):
        assert os.path.lexists(path), f"README names {path}, the package did not install it"

    # Running it wrote nothing dpkg does not know about (bytecode is shipped, valid).
    listed = set(
        subprocess.run(["dpkg", "-L", "numa-agent"], capture_output=True, text=True, check=True)
        .stdout.strip()
        .splitlines()
    )
    on_disk = {str(p) for p in Path(build_deb.PREFIX).rglob("*")}
    assert on_disk - listed == set()

    # As if the agent had run: state that removal keeps and purge deletes.
    STATE_DIR.mkdir(mode=0o700)
    (STATE_DIR / "state.json").write_text("{}")
    enabled = systemd_links()

    subprocess.run(["dpkg", "--remove", "numa-agent"], capture_output=True, check=True)
    assert dpkg_status() == "deinstall ok config-files"
    kept = {DEFAULT_CONFIG_PATH}
    left = {p for p in listed if os.path.lexists(p) and not os.path.isdir(p)}
    assert left == kept
    for gone in (build_deb.PREFIX, "/usr/share/doc/numa-agent", "/usr/bin/numa-agent"):
        assert not os.path.lexists(gone), gone
    assert (STATE_DIR / "state.json").exists()
    # What systemd was told (enable links; a mask so they stay inert) is config too.
    assert {p.name for p in systemd_links() - enabled} <= {"numa-agent.service"}

    subprocess.run(["dpkg", "--purge", "numa-agent"], capture_output=True, check=True)
    assert dpkg_status() == "not-installed"
    for gone in (CONFIG_DIR, STATE_DIR):
        assert not gone.exists(), gone
    assert systemd_links() == set()
