"""What tests that need root share: the skip (or, in CI, failure) when not root, as
tests/e2e/conftest.py does for containerd, and a read-only mount of a directory."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def require_root(why: str) -> None:
    """Skip when not root; in CI (env CI set) fail instead, so CI never goes green
    on a test that did not run."""
    if os.geteuid() == 0:
        return
    reason = f"this test needs root ({why})"
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(f"{reason} (CI is set, so this fails instead of skipping)", pytrace=False)
    pytest.skip(reason)


@contextlib.contextmanager
def read_only(directory: Path) -> Iterator[None]:
    """`directory` as a read-only bind mount of itself (what systemd's ReadOnlyPaths=
    gives a service); root only. Unmounted afterwards, lazily if something still
    holds it open, so no mount outlives the test."""
    require_root("a read-only bind mount")
    subprocess.run(["mount", "--bind", str(directory), str(directory)], check=True)
    try:
        subprocess.run(
            ["mount", "-o", "remount,ro,bind", str(directory)], check=True, capture_output=True
        )
        yield
    finally:
        done = subprocess.run(["umount", str(directory)], capture_output=True)
        if done.returncode != 0:
            subprocess.run(["umount", "-l", str(directory)], check=True)
