"""docs/configuration.md and the code agree: every key documented, with its real default."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from agent.commands.config import _yaml_value
from agent.config import AGENT_KEYS, AgentConfig
from agent.policy.config import PolicyConfig

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def documented_rows() -> dict[str, str]:
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \|", DOC.read_text(), re.MULTILINE)
    return {key: default.strip() for key, default in rows}


ALL_KEYS = [*AGENT_KEYS, *(f.name for f in dataclasses.fields(PolicyConfig))]


def test_every_key_is_documented_and_nothing_else() -> None:
    assert sorted(documented_rows()) == sorted(ALL_KEYS)


@pytest.mark.parametrize("key", ALL_KEYS)
def test_documented_default_matches_the_code(key: str) -> None:
    config = AgentConfig()
    value = getattr(config, key) if key in AGENT_KEYS else getattr(config.policy, key)
    documented = documented_rows()[key]
    if value in ("", ()) or str(value) == "":
        assert documented.startswith("empty"), (key, documented)
    else:
        assert documented.strip("`") == _yaml_value(value), (key, documented)
