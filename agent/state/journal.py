"""The state journal: what changed since the last full state file, one line per save.

Rewriting the whole state on every placement costs what the node holds, not what
changed. So a save appends one line to `state.journal` with only the entries that
changed (a pod or container added, replaced or gone), and the full file is
rewritten (compacted) only when the journal has grown past the state's own size.

Each line is `{"generation": G, "checksum": sha256(changes), "changes": {...}}`.
The state file names the generation of the journal that follows it; lines of
another generation (a journal left from an older state file) are ignored. A crash
in the middle of an append leaves a last line that does not parse or whose
checksum fails: replay stops there, and what came before stands.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent.state.store import FileRefused, read_regular_file

log = logging.getLogger(__name__)

JOURNAL_FILE = "state.journal"
GENERATION_KEY = "journal"  # in the state payload: the generation that follows it
SECTIONS = ("pods", "containers")
MAX_JOURNAL_BYTES = 8 << 20  # never read more than this of a journal
_OPEN_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


class JournalError(Exception):
    """A journal line could not be appended (the caller writes the full state instead)."""


def _checksum(changes_text: str) -> str:
    return hashlib.sha256(changes_text.encode()).hexdigest()


def changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per section, the entries of `new` that differ from `old` (None: removed).

    Entries are compared by identity first: the state encoder hands out the same
    dict for an entry that did not change, so the common case costs no comparison.
    """
    out: dict[str, dict[str, Any]] = {}
    for section in SECTIONS:
        before: Mapping[str, Any] = old.get(section, {})
        after: Mapping[str, Any] = new.get(section, {})
        diff: dict[str, Any] = {}
        for key, value in after.items():
            previous = before.get(key)
            if previous is not value and previous != value:
                diff[key] = value
        for key in before:
            if key not in after:
                diff[key] = None
        if diff:
            out[section] = diff
    return out


def apply(payload: Mapping[str, Any], change: Mapping[str, Any]) -> dict[str, Any]:
    """`payload` with one journal line's changes applied (a new dict; sections copied)."""
    out = dict(payload)
    for section, entries in change.items():
        if section not in SECTIONS or not isinstance(entries, dict):
            continue
        merged = dict(out.get(section) or {})
        for key, value in entries.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        out[section] = merged
    return out


class Journal:
    """The journal file beside the state file."""

    def __init__(self, state_dir: Path | str) -> None:
        self.path = Path(state_dir) / JOURNAL_FILE
        self.size = 0  # bytes appended since the last reset (what compaction watches)

    def append(self, generation: str, change: Mapping[str, Any]) -> int:
        """Append one line durably; returns its size. JournalError on failure."""
        text = json.dumps(change, sort_keys=True, separators=(",", ":"))
        line = json.dumps({"generation": generation, "checksum": _checksum(text)}, sort_keys=True)[
            :-1
        ]
        data = f'{line}, "changes": {text}}}\n'.encode()
        try:
            fd = os.open(self.path, _OPEN_APPEND, 0o600)
            try:
                os.fchmod(fd, 0o600)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as err:
            raise JournalError(f"cannot append to {self.path}: {err.strerror or err}") from err
        self.size += len(data)
        return len(data)

    def reset(self) -> None:
        """Start empty (after a full state file was written with a new generation)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self.size = 0

    def replay(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """`payload` (the state file's) with every valid line of its generation applied."""
        generation = payload.get(GENERATION_KEY)
        out = dict(payload)
        if not isinstance(generation, str):
            return out
        data = self._read()
        if data is None:
            return out
        applied = 0
        for number, line in enumerate(data.split(b"\n")):
            if not line:
                continue
            ok, change = _line(line, generation)
            if not ok:
                log.warning(
                    "state journal %s: line %d is damaged (a save cut short); "
                    "the %d lines before it stand",
                    self.path,
                    number + 1,
                    applied,
                )
                break
            if change is not None:
                out = apply(out, change)
                applied += 1
        self.size = len(data)
        return out

    def _read(self) -> bytes | None:
        """The journal's bytes; None (with a warning) if it is absent, or not a regular
        file read within MAX_JOURNAL_BYTES (the store's own safe read)."""
        try:
            return read_regular_file(self.path, MAX_JOURNAL_BYTES)
        except FileNotFoundError:
            return None
        except (FileRefused, OSError) as err:
            log.warning("state journal %s is unusable (%s); ignoring it", self.path, err)
            return None


def _line(line: bytes, generation: str) -> tuple[bool, dict[str, Any] | None]:
    """(valid, its changes): changes None for a line of another generation."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return False, None
    if not isinstance(record, dict):
        return False, None
    if record.get("generation") != generation:
        return True, None  # from before the state file: superseded by it
    change = record.get("changes")
    if not isinstance(change, dict):
        return False, None
    text = json.dumps(change, sort_keys=True, separators=(",", ":"))
    if record.get("checksum") != _checksum(text):
        return False, None
    return True, change


def saved_payload(state_dir: Path | str) -> dict[str, Any]:
    """What the state directory holds, file and journal together, read as-is (no
    checksum or machine check): for people and tests looking at the saved state.
    The agent itself reads it through StateWriter.load."""
    document = json.loads((Path(state_dir) / "state.json").read_text())
    payload = document["payload"]
    if not isinstance(payload, dict):
        raise ValueError(f"{state_dir}/state.json: the payload is not an object")
    out = Journal(state_dir).replay(payload)
    out.pop(GENERATION_KEY, None)
    return out
