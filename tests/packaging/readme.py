"""The README's "Installing on a node" section, for tests that hold it to the files."""

from __future__ import annotations

import re

from tests.packaging.helpers import ROOT

HEADING = "## Installing on a node"


def install_section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(HEADING)
    end = text.find("\n## ", start + len(HEADING))
    return text[start : end if end != -1 else len(text)]


def packaged_paths(section: str) -> set[str]:
    """Absolute paths the section names inside what the package installs."""
    prefixes = ("/opt/numa-agent", "/usr/share/doc/numa-agent", "/etc/numa-agent", "/lib/systemd")
    found = re.findall(r"(/[\w./-]+)", section)
    return {p.rstrip(".") for p in found if p.startswith(prefixes)}
