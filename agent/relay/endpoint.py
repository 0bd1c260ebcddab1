"""CRI endpoint strings: `unix:///path` or a bare path, to a filesystem path
and a gRPC target. The one place both spellings are accepted."""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass
from pathlib import Path

UNIX_PREFIX = "unix://"
PROBE_TIMEOUT_S = 1.0


class EndpointError(ValueError):
    """An endpoint that is neither `unix:///abs/path` nor a filesystem path."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    path: Path

    @classmethod
    def parse(cls, text: str) -> Endpoint:
        raw = text.strip()
        if raw.startswith(UNIX_PREFIX):
            raw = raw[len(UNIX_PREFIX) :]
            if not raw.startswith("/"):
                raise EndpointError(
                    f"endpoint {text!r}: after unix:// the path must be absolute "
                    "(unix:///run/containerd/containerd.sock)"
                )
        elif "://" in raw or not raw:
            raise EndpointError(
                f"endpoint {text!r}: only unix sockets are supported, "
                "as unix:///path/to.sock or /path/to.sock"
            )
        return cls(Path(raw))

    @property
    def target(self) -> str:
        """The gRPC channel target for this socket."""
        return f"unix://{self.path.absolute()}"

    def __str__(self) -> str:
        return f"unix://{self.path}"


def probe(path: Path, timeout: float = PROBE_TIMEOUT_S) -> OSError | None:
    """None if a server accepts connections on the unix socket `path`, else
    the error connecting gave (ConnectionRefusedError: a stale socket file)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        try:
            conn.connect(str(path))
        except OSError as err:
            if err.errno == errno.EAGAIN:  # listen backlog full: someone is there
                return None
            return err
    return None
