"""The code stays ruff-formatted, ruff-clean and mypy --strict clean (`make lint`), in CI too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "format", "--check", "."],
        ["ruff", "check", "."],
        ["mypy"],
    ],
    ids=["ruff-format", "ruff-check", "mypy"],
)
def test_lint(command: list[str]) -> None:
    tool = BIN / command[0]
    done = subprocess.run([str(tool), *command[1:]], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
