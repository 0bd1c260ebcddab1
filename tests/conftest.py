"""Fixtures all test packages share: the named machine shapes, written to a fake
sysfs and read by the real reader once per session."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from agent.config import DEFAULT_FEATURE_FILE
from devtools.fakesysfs import write_shape
from topology.sysfs import read_machine
from topology.tree import Machine

_MACHINES: dict[str, Machine] = {}

# Hypothesis fails an example that takes over 200 ms by default: a duration asserted,
# which a busy machine misses. No example here is about speed (benchmarks/ are).
settings.register_profile("numa-agent", deadline=None)
settings.load_profile("numa-agent")


@pytest.fixture(scope="session")
def machines(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Machine]:
    """machines("xeon-2s-2numa") -> that shape's Machine (devtools.fakesysfs.SHAPES)."""
    base = tmp_path_factory.mktemp("shapes")

    def get(name: str) -> Machine:
        if name not in _MACHINES:
            write_shape(name, base / name)
            _MACHINES[name] = read_machine(base / name, cpu_info=False)
        return _MACHINES[name]

    return get


# The agent's real host paths: tests use temporary ones, and must never leave these
# behind (the package test refuses a host that looks like it has numa-agent).
HOST_PATHS = (Path("/var/lib/numa-agent"), Path("/var/run/numa-agent"), Path("/run/numa-agent"))


@pytest.fixture(scope="session", autouse=True)
def host_paths_untouched() -> Iterator[None]:
    before = {path for path in HOST_PATHS if path.exists()}
    yield
    created = [str(path) for path in HOST_PATHS if path.exists() and path not in before]
    assert not created, f"the tests created the agent's host paths {created}"


@pytest.fixture(autouse=True)
def feature_file_untouched() -> Iterator[None]:
    """A daemon started with the default feature_file writes the host's NFD labels (as
    root): tests start daemons with feature_file "" or a temporary path. Checked after
    every test, so the one that wrote it is named (the package test's purge deletes it)."""
    path = Path(DEFAULT_FEATURE_FILE)
    before = path.exists()
    yield
    assert before or not path.exists(), f"this test wrote {path}: give its daemon feature_file=''"
