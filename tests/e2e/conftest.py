"""Fixtures for end-to-end tests against a real, private containerd (root only).

Outside CI a host without root or containerd skips these tests with the reason; in CI
(env CI set) the same condition fails them, so CI can never go green by skipping.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.containerd import PrivateContainerd, missing_prerequisites
from devtools.criclient import CRIClient
from devtools.pods import PodRunner


def require_containerd() -> None:
    """Skip (or, in CI, fail) when this host cannot run containerd."""
    missing = missing_prerequisites()
    if not missing:
        return
    reason = "end-to-end test needs root and containerd: " + "; ".join(missing)
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(f"{reason} (CI is set, so this fails instead of skipping)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def containerd() -> Iterator[PrivateContainerd]:
    """One private containerd for the whole session, stopped with all it ran at the end."""
    require_containerd()
    # Not tmp_path_factory: its paths can push the socket past the 107-byte unix limit.
    base = Path(tempfile.mkdtemp(prefix="numa-e2e-"))
    env = PrivateContainerd(base)
    try:
        env.start()
        yield env
    finally:
        env.stop()
        shutil.rmtree(base, ignore_errors=True)


class Pods(PodRunner):
    """Pods a test runs through `client` (containerd, or the agent in front of it); whatever
    the test did not remove is removed afterwards, with its pod cgroup."""

    def __init__(self, containerd: PrivateContainerd, client: CRIClient | None = None) -> None:
        super().__init__(
            client or containerd.client(),
            log_root=str(containerd.pod_log_root),
            namespace="e2e",
        )
        self.containerd = containerd


@pytest.fixture
def pods(containerd: PrivateContainerd) -> Iterator[Pods]:
    tracker = Pods(containerd)
    yield tracker
    tracker.remove_all()
