"""`pip install .` and the .deb install what runs on a node and no development tooling:
no devtools/ (demo, containerd harness, OCI image builder, fake runtime), no tests/,
no benchmarks/, and no fault injection inside the agent's own modules."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.packaging.conftest import build_deb
from tests.packaging.helpers import ROOT
from tests.packaging.installed import harness_problems, record_paths

# What a `pip install .` copies the checkout without: local state, not sources.
NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", "*.pyc", ".*_cache",
    ".hypothesis", "bench-results",
)  # fmt: skip
# Modules the node needs, one per job, so an empty or wrong listing cannot pass.
EXPECTED = {
    "agent/cli.py",
    "agent/daemon.py",
    "agent/kubelet.py",
    "agent/runtime/memory.py",
    "agent/simulate/driver.py",
    "topology/cpuset.py",
    "proto/cri_pb2.py",
    "proto/cri.proto",
}


def pip_install_target(tmp_path: Path) -> Path:
    """`pip install .` of a copy of the checkout into a --target directory.

    A copy, so the build writes no build/ or egg-info into the checkout; the whole
    checkout, devtools/ and tests/ included, as `pip install .` sees it.
    """
    source, target = tmp_path / "src", tmp_path / "site-packages"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCES)
    assert (source / "devtools").is_dir() and (source / "tests").is_dir()
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile"]
    # Without build isolation: the venv's setuptools (>=77, see Makefile), no index needed.
    command = [*pip, "--no-build-isolation", "--target", str(target), str(source)]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return target


def test_pip_install_holds_only_what_runs_on_a_node(tmp_path: Path) -> None:
    site_packages = pip_install_target(tmp_path)
    installed = set(record_paths(site_packages))
    assert installed >= EXPECTED, EXPECTED - installed
    assert (site_packages / "bin" / "numa-agent").is_file()
    assert harness_problems(site_packages) == []
    # The license as an SPDX expression (the TOML-table form made setuptools warn).
    (metadata,) = site_packages.glob("numa_agent-*.dist-info/METADATA")
    assert "License-Expression: Apache-2.0" in metadata.read_text().splitlines()


def test_the_deb_holds_only_what_runs_on_a_node(built_deb: Path, tmp_path: Path) -> None:
    subprocess.run(["dpkg-deb", "-x", str(built_deb), str(tmp_path)], check=True)
    venv = tmp_path / build_deb.PREFIX.relative_to("/")
    (site_packages,) = venv.glob("lib/python3*/site-packages")
    installed = set(record_paths(site_packages))
    assert installed >= EXPECTED, EXPECTED - installed
    assert harness_problems(site_packages) == []
    # Nothing of the development tooling anywhere else in the package either.
    listing = subprocess.run(
        ["dpkg-deb", "-c", str(built_deb)], capture_output=True, text=True, check=True
    ).stdout
    assert "/devtools/" not in listing and "/benchmarks/" not in listing


def _installed_copy(tmp_path: Path) -> Path:
    """A site-packages as the package installs it, to plant harness files in."""
    site_packages = tmp_path / "site-packages"
    for path in EXPECTED:
        (site_packages / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, site_packages / path)
    dist_info = site_packages / "numa_agent-0.1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "RECORD").write_text("".join(f"{p},,\n" for p in sorted(EXPECTED)))
    return site_packages


def _plant(site_packages: Path, path: str, source: str) -> None:
    (site_packages / path).parent.mkdir(parents=True, exist_ok=True)
    (site_packages / path).write_text(source)
    with (site_packages / "numa_agent-0.1.0.dist-info" / "RECORD").open("a") as record:
        record.write(f"{path},,\n")


@pytest.mark.parametrize(
    ("path", "source", "problem"),
    [
        ("devtools/demo.py", "", "devtools/ is installed"),
        ("tests/conftest.py", "", "tests/ is installed"),
        ("benchmarks/__main__.py", "", "benchmarks/ is installed"),
        ("agent/containerd_env.py", "", "agent/containerd_env.py: a development module"),
        ("agent/tools/oci_image.py", "", "agent/tools/oci_image.py: a development module"),
        (
            "agent/runtime/faults.py",
            "class X:\n    def fail_next(self): ...\n",
            "agent/runtime/faults.py: defines fault injection ['fail_next']",
        ),
        (
            "agent/daemon2.py",
            "from devtools.criclient import CRIClient\n",
            "agent/daemon2.py: imports ['devtools']",
        ),
        ("extra/thing.py", "", "extra/thing.py: outside ['agent', 'proto', 'topology']"),
    ],
)
def test_the_check_finds_planted_harness(
    tmp_path: Path, path: str, source: str, problem: str
) -> None:
    site_packages = _installed_copy(tmp_path)
    assert harness_problems(site_packages) == []
    _plant(site_packages, path, source)
    assert problem in harness_problems(site_packages)
