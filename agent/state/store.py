"""Atomic, checksummed storage of the agent's state in one JSON file.

The file is written to a temporary name, fsynced, renamed over the old one and
the directory fsynced, so a crash at any point leaves either the old or the new
state. A file that is corrupt, truncated, of an unknown schema or from another
machine is moved aside (never deleted, never crash-looped on) and the caller
rebuilds from the runtime.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
STATE_FILE = "state.json"

log = logging.getLogger(__name__)


class StateError(Exception):
    """The state file could not be written (the caller decides how to answer)."""


@dataclass(frozen=True, slots=True)
class LoadResult:
    """What `StateStore.load` found. `payload` is None when there is nothing usable;
    `moved_aside` names where a rejected file went and `reason` why."""

    payload: dict[str, Any] | None
    moved_aside: Path | None = None
    reason: str = ""


def _checksum(payload_text: str) -> str:
    return hashlib.sha256(payload_text.encode()).hexdigest()


def _canonical(payload: Mapping[str, Any]) -> str:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"))


class StateStore:
    """One state file under `state_dir`, bound to a machine fingerprint.

    `clock` is injectable so tests can name the moved-aside file deterministically.
    """

    def __init__(
        self,
        state_dir: Path | str,
        machine_fingerprint: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.path = self.state_dir / STATE_FILE
        self.machine_fingerprint = machine_fingerprint
        self._clock = clock

    def save(self, payload: Mapping[str, Any]) -> None:
        """Write atomically and durably; raises StateError naming the path on failure."""
        # The payload is encoded once, compactly (json's fast C encoder), and the
        # document is assembled around that text: this runs on every placement.
        payload_text = _canonical(payload)
        header = json.dumps(
            {"schema": SCHEMA_VERSION, "machine": self.machine_fingerprint}, sort_keys=True
        )
        data = (
            f'{header[:-1]}, "checksum": "{_checksum(payload_text)}", "payload": {payload_text}}}\n'
        ).encode()
        tmp = self.path.with_name(f".{STATE_FILE}.{os.getpid()}.tmp")
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                view = memoryview(data)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
            self._fsync_dir()
        except OSError as err:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise StateError(f"cannot write state file {self.path}: {err.strerror or err}") from err

    def load(self) -> LoadResult:
        """Read the state; anything unusable is moved aside with a warning, never raised."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return LoadResult(None)
        except OSError as err:
            return self._reject(f"unreadable: {err.strerror or err}")
        problem, payload = self._validate(raw)
        if problem:
            return self._reject(problem)
        return LoadResult(payload)

    def move_aside(self, reason: str) -> Path | None:
        """Move the current file aside as `load` does a rejected one (its payload was
        read but cannot be used); returns where it went, None if it could not move."""
        return self._reject(reason).moved_aside

    def _validate(self, raw: bytes) -> tuple[str, dict[str, Any] | None]:
        try:
            document = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            return f"not valid JSON (truncated or corrupt): {err}", None
        if not isinstance(document, dict):
            return "not a JSON object", None
        schema = document.get("schema")
        if schema != SCHEMA_VERSION:
            return f"unknown schema version {schema!r} (this agent reads {SCHEMA_VERSION})", None
        payload = document.get("payload")
        if not isinstance(payload, dict):
            return "payload missing or not an object", None
        if document.get("checksum") != _checksum(_canonical(payload)):
            return "checksum mismatch (file modified or corrupt)", None
        machine = document.get("machine")
        if machine != self.machine_fingerprint:
            return "written on a different machine topology", None
        return "", payload

    def _reject(self, reason: str) -> LoadResult:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(self._clock()))
        aside = self.path.with_name(f"{STATE_FILE}.rejected-{stamp}")
        counter = 1
        while aside.exists():
            aside = self.path.with_name(f"{STATE_FILE}.rejected-{stamp}.{counter}")
            counter += 1
        try:
            os.replace(self.path, aside)
        except OSError as err:
            log.warning(
                "state file %s is unusable (%s) and could not be moved aside: %s",
                self.path,
                reason,
                err,
            )
            return LoadResult(None, None, reason)
        log.warning(
            "state file %s is unusable (%s); moved it to %s and rebuilding state from the runtime",
            self.path,
            reason,
            aside,
        )
        return LoadResult(None, aside, reason)

    def _fsync_dir(self) -> None:
        fd = os.open(self.state_dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
