"""The .deb, built once per session for every test that looks at it."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from tests.packaging.helpers import ROOT, load_script, require

build_deb = load_script("build_deb")


def build_prerequisites() -> list[str]:
    """What building the package needs (not root: dpkg-deb --root-owner-group)."""
    missing = [] if shutil.which("dpkg-deb") else ["dpkg-deb"]
    if not Path(build_deb.DEFAULT_PYTHON).is_file():
        missing.append(build_deb.DEFAULT_PYTHON)
    return missing


@pytest.fixture(scope="session")
def built_deb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require(build_prerequisites(), "building the package")
    started = time.monotonic()
    # xz level 1: the same package, built in a fraction of the time.
    result = build_deb.build(ROOT, tmp_path_factory.mktemp("deb"), xz_level=1)
    print(f"build: {time.monotonic() - started:.1f} s, {result.deb.stat().st_size} bytes")
    deb: Path = result.deb
    return deb
