"""Node Feature Discovery's feature-file format: one `name=value` per line.

NFD's local source reads every file in its features.d directory (not dot
files), `#` lines are comments, and each line becomes a node label.
"""

from __future__ import annotations

from collections.abc import Mapping

HEADER = "# Node labels from numa-agent (docs/cluster-labels.md); the agent rewrites this file."


def feature_file_text(labels: Mapping[str, str]) -> str:
    """The header, then the labels sorted by name."""
    lines = [HEADER, *(f"{name}={value}" for name, value in sorted(labels.items()))]
    return "\n".join(lines) + "\n"


def parse_feature_file(text: str) -> dict[str, str]:
    """Labels from feature-file text as NFD reads it (a bare name means "true")."""
    labels: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        labels[name] = value if sep else "true"
    return labels
