"""Atomic, checksummed storage of the agent's state in one JSON file.

The file is written to a temporary name, fsynced, renamed over the old one and
the directory fsynced, so a crash at any point leaves either the old or the new
state. Nothing a file in the state directory can be (corrupt, truncated, of an
unknown schema or from another machine, but also a FIFO, a symlink, a document
nested too deeply or bigger than MAX_STATE_BYTES) makes loading raise, block or
read without bound: it is moved aside (never deleted, never crash-looped on) and
the caller rebuilds from the runtime. This module owns bytes, header, checksum,
size and file safety; the payload's schema belongs to its caller.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import stat
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
STATE_FILE = "state.json"
# The largest state file written or read. Parsing JSON can cost up to ~26 times
# the file's size in Python objects (a file of empty lists), so 8 MiB peaks near
# 210 MiB: with the agent's own ~60 MiB that stays under the unit's MemoryMax=512M.
# A node's state today is well under 4 MiB (500 containers with kubelet's usual
# annotations); a bigger one is refused on save with an error, never half written.
MAX_STATE_BYTES = 8 << 20
FILE_MODE = 0o600

# Opening must neither follow a symlink planted as the file (ELOOP) nor wait for a
# writer (a FIFO opened for reading blocks until one comes, without O_NONBLOCK).
_OPEN_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# O_EXCL refuses any name that exists, a symlink included, so nothing planted under
# the temporary name is followed or truncated; a stale one is unlinked first.
_OPEN_WRITE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

log = logging.getLogger(__name__)


class StateError(Exception):
    """The state file could not be written (the caller decides how to answer)."""


class FileRefused(Exception):
    """The file at the state path is not one to read; the message says why."""


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


def read_regular_file(path: Path, max_bytes: int) -> bytes:
    """The bytes of the regular file at `path`, at most `max_bytes`: never following a
    symlink, never waiting on a FIFO, never reading without bound. FileRefused says
    why anything else there is not read; FileNotFoundError and OSError pass."""
    try:
        fd = os.open(path, _OPEN_READ)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise FileRefused("a symbolic link, not the agent's file") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileRefused(f"not a regular file (mode {st.st_mode:o})")
        if st.st_size > max_bytes:
            raise FileRefused(f"{st.st_size} bytes, over the limit of {max_bytes} bytes")
        chunks: list[bytes] = []
        size = 0
        while True:
            # Bounded even if the file grows after fstat.
            chunk = os.read(fd, max_bytes + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                raise FileRefused(f"grew over the limit of {max_bytes} bytes while read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def others_can_write(st: os.stat_result) -> bool:
    """Whether users other than the agent's (root) can change a directory's entries."""
    return st.st_uid != os.geteuid() or bool(stat.S_IMODE(st.st_mode) & 0o022)


class StateStore:
    """One state file under `state_dir`, bound to a machine fingerprint.

    `clock` is injectable so tests can name the moved-aside file deterministically;
    `max_bytes` so they can reach the bound without writing megabytes.
    `write_failures` counts saves that failed, for the metrics. A file carrying
    one of `also_accept` (an older version's fingerprint of this same machine) is
    read too; saves always carry `machine_fingerprint`.
    """

    def __init__(
        self,
        state_dir: Path | str,
        machine_fingerprint: str,
        clock: Callable[[], float] = time.time,
        max_bytes: int = MAX_STATE_BYTES,
        also_accept: Collection[str] = (),
    ) -> None:
        self.state_dir = Path(state_dir)
        self.path = self.state_dir / STATE_FILE
        self.machine_fingerprint = machine_fingerprint
        self.also_accept = frozenset(also_accept)
        self.max_bytes = max_bytes
        self.write_failures = 0
        self._clock = clock

    # -- save -------------------------------------------------------------------

    def save(self, payload: Mapping[str, Any]) -> int:
        """Write atomically and durably, returning the file's size; raises StateError
        naming the path on failure (the old file, if any, is then left as it was)."""
        try:
            return self._save(payload)
        except StateError:
            self.write_failures += 1
            raise

    def _save(self, payload: Mapping[str, Any]) -> int:
        # The payload is encoded once, compactly (json's fast C encoder), and the
        # document is assembled around that text: this runs on every placement.
        payload_text = _canonical(payload)
        header = json.dumps(
            {"schema": SCHEMA_VERSION, "machine": self.machine_fingerprint}, sort_keys=True
        )
        data = (
            f'{header[:-1]}, "checksum": "{_checksum(payload_text)}", "payload": {payload_text}}}\n'
        ).encode()
        if len(data) > self.max_bytes:
            raise StateError(
                f"cannot write state file {self.path}: the state is {len(data)} bytes, over "
                f"the limit of {self.max_bytes} bytes (a larger file could not be read back "
                "within the agent's memory); the previous file is kept"
            )
        tmp = self.path.with_name(f".{STATE_FILE}.{os.getpid()}.tmp")
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp.unlink(missing_ok=True)  # a leftover of ours, or something planted
            fd = os.open(tmp, _OPEN_WRITE, FILE_MODE)
            try:
                os.fchmod(fd, FILE_MODE)  # exactly, whatever the umask
                view = memoryview(data)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)  # replaces a symlink itself, never its target
            self._fsync_dir()
        except OSError as err:
            # The save already failed; that error is the one to report.
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise StateError(f"cannot write state file {self.path}: {err.strerror or err}") from err
        return len(data)

    # -- load -------------------------------------------------------------------

    def load(self) -> LoadResult:
        """Read the state; anything unusable is moved aside with a warning, never raised."""
        try:
            distrust = self._directory_problem()
            if distrust:
                if not os.path.lexists(self.path):
                    return LoadResult(None)
                return self._reject(distrust)
            raw = self._read()
        except FileNotFoundError:
            return LoadResult(None)
        except FileRefused as err:
            return self._reject(str(err))
        except OSError as err:
            return self._reject(f"unreadable: {err.strerror or err}")
        try:
            problem, payload = self._validate(raw)
        except Exception as err:  # the boundary: no file in the state directory stops the agent
            problem, payload = f"cannot be parsed ({type(err).__name__}: {err})", None
        if problem:
            return self._reject(problem)
        return LoadResult(payload)

    def _directory_problem(self) -> str:
        """Why the directory's files cannot be trusted, or "" (a missing one is fine)."""
        try:
            st = os.stat(self.state_dir)
        except FileNotFoundError:
            return ""
        if others_can_write(st):
            return (
                f"other users can write its directory {self.state_dir} (mode "
                f"{stat.S_IMODE(st.st_mode):o}, owner uid {st.st_uid}), so its contents "
                "cannot be trusted; make it owned by the agent (root) with mode 700"
            )
        return ""

    def _read(self) -> bytes:
        return read_regular_file(self.path, self.max_bytes)

    def _validate(self, raw: bytes) -> tuple[str, dict[str, Any] | None]:
        try:
            document = json.loads(raw)
        except RecursionError:
            return "nested too deeply to be the agent's state", None
        except (UnicodeDecodeError, ValueError) as err:
            # JSONDecodeError, and ValueError for numbers past int's digit limit.
            return f"not valid JSON (truncated or corrupt): {err}", None
        if not isinstance(document, dict):
            return "not a JSON object", None
        schema = document.get("schema")
        if schema != SCHEMA_VERSION:
            return f"unknown schema version {schema!r} (this agent reads {SCHEMA_VERSION})", None
        payload = document.get("payload")
        if not isinstance(payload, dict):
            return "payload missing or not an object", None
        try:
            canonical = _canonical(payload)
        except RecursionError:
            return "payload nested too deeply to be the agent's state", None
        if document.get("checksum") != _checksum(canonical):
            return "checksum mismatch (file modified or corrupt)", None
        machine = document.get("machine")
        if machine != self.machine_fingerprint and machine not in self.also_accept:
            return "written on a different machine topology", None
        return "", payload

    # -- moving aside -----------------------------------------------------------

    def move_aside(self, reason: str) -> Path | None:
        """Move the current state file aside as `load` does with a rejected one, with
        a warning naming `reason` (for a caller that finds the payload unusable).
        Returns where it went; None when there was no file or it could not be moved."""
        if not os.path.lexists(self.path):
            return None
        return self._reject(reason).moved_aside

    def _reject(self, reason: str) -> LoadResult:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(self._clock()))
        aside = self.path.with_name(f"{STATE_FILE}.rejected-{stamp}")
        counter = 1
        while os.path.lexists(aside):
            aside = self.path.with_name(f"{STATE_FILE}.rejected-{stamp}.{counter}")
            counter += 1
        try:
            # rename moves a symlink, FIFO or directory itself; nothing is opened.
            os.replace(self.path, aside)
        except OSError as err:
            log.warning(
                "state file %s is unusable (%s) and could not be moved aside: %s",
                self.path,
                reason,
                err.strerror or err,
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
        fd = os.open(self.state_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
