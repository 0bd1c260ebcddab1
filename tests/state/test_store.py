"""The state file: atomic writes, checksums, and moving unusable files aside."""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

import pytest

from agent.state import SCHEMA_VERSION, StateError, StateStore

FIXED_TIME = 1_700_000_000.0  # 2023-11-14T22:13:20Z


def store(tmp_path: Path, machine: str = "m1") -> StateStore:
    return StateStore(tmp_path / "state", machine, clock=lambda: FIXED_TIME)


def test_missing_file_is_empty_state(tmp_path: Path) -> None:
    result = store(tmp_path).load()
    assert result.payload is None and result.moved_aside is None


def test_round_trip_and_no_temporary_files_left(tmp_path: Path) -> None:
    s = store(tmp_path)
    s.save({"containers": {"c1": {"cpus": "2-3"}}})
    s.save({"containers": {"c1": {"cpus": "4-5"}}})
    assert s.load().payload == {"containers": {"c1": {"cpus": "4-5"}}}
    assert sorted(p.name for p in s.state_dir.iterdir()) == ["state.json"]
    assert (s.path.stat().st_mode & 0o777) == 0o600


def _corrupt_truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _corrupt_checksum(path: Path) -> None:
    doc = json.loads(path.read_text())
    doc["payload"]["containers"]["c1"]["cpus"] = "0-63"
    path.write_text(json.dumps(doc))


def _corrupt_schema(path: Path) -> None:
    doc = json.loads(path.read_text())
    doc["schema"] = SCHEMA_VERSION + 1
    path.write_text(json.dumps(doc))


def _corrupt_garbage(path: Path) -> None:
    path.write_bytes(b"\x00\xff not json")


def _corrupt_list(path: Path) -> None:
    path.write_text("[1, 2]")


@pytest.mark.parametrize(
    ("corrupt", "reason"),
    [
        (_corrupt_truncated, "not valid JSON"),
        (_corrupt_checksum, "checksum mismatch"),
        (_corrupt_schema, "unknown schema version"),
        (_corrupt_garbage, "not valid JSON"),
        (_corrupt_list, "not a JSON object"),
    ],
)
def test_unusable_file_is_moved_aside_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, corrupt: object, reason: str
) -> None:
    s = store(tmp_path)
    s.save({"containers": {"c1": {"cpus": "2-3"}}})
    original = s.path.read_bytes()
    corrupt(s.path)  # type: ignore[operator]
    broken = s.path.read_bytes()
    assert broken != original
    with caplog.at_level(logging.WARNING):
        result = s.load()
    assert result.payload is None
    assert reason in result.reason
    assert result.moved_aside == s.state_dir / "state.json.rejected-20231114T221320Z"
    assert result.moved_aside.read_bytes() == broken  # kept for the operator, not deleted
    assert not s.path.exists()
    assert reason in caplog.text and str(result.moved_aside) in caplog.text
    # A second rejection in the same second does not overwrite the first.
    s.path.write_text("{")
    second = s.load()
    assert second.moved_aside is not None and second.moved_aside != result.moved_aside
    assert result.moved_aside.exists()


def test_state_from_another_machine_is_moved_aside(tmp_path: Path) -> None:
    store(tmp_path, "machine-a").save({"x": 1})
    result = store(tmp_path, "machine-b").load()
    assert result.payload is None
    assert "different machine" in result.reason
    assert result.moved_aside is not None


def test_write_failure_names_the_path(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    s = StateStore(blocker / "state", "m")
    with pytest.raises(StateError, match=re.escape("not-a-dir/state/state.json")):
        s.save({"x": 1})


def test_save_replaces_atomically(tmp_path: Path) -> None:
    # The new content is visible at once under the final name, and the inode
    # changes (rename, not in-place rewrite that a crash could leave half done).
    s = store(tmp_path)
    s.save({"n": 1})
    before = os.stat(s.path).st_ino
    s.save({"n": 2})
    assert os.stat(s.path).st_ino != before
    assert s.load().payload == {"n": 2}
