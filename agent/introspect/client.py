"""Asking a running agent for its status over its introspection socket."""

from __future__ import annotations

import http.client
import json
import socket
from pathlib import Path
from typing import Any

from agent.introspect.server import STATUS_PATH


class StatusError(Exception):
    """The agent could not be asked; the message says why and what to check."""


class AgentNotRunning(StatusError):
    """Nothing answers on the status socket."""


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path, timeout: float) -> None:
        super().__init__("agent", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(str(self._path))
        except OSError:
            sock.close()
            raise
        self.sock = sock


def fetch_status(path: Path, timeout: float = 5.0) -> dict[str, Any]:
    conn = _UnixConnection(path, timeout)
    try:
        conn.request("GET", STATUS_PATH)
        response = conn.getresponse()
        body = response.read()
    except (FileNotFoundError, ConnectionRefusedError):
        raise AgentNotRunning(
            f"no agent answers on {path}: is numa-agent running (systemctl status numa-agent), "
            "and are --listen / --config the ones it runs with?"
        ) from None
    except PermissionError:
        raise StatusError(
            f"{path}: permission denied; the status socket is root's (sudo)"
        ) from None
    except (OSError, http.client.HTTPException) as err:
        raise StatusError(f"{path}: the agent did not answer: {err}") from None
    finally:
        conn.close()
    try:
        document = json.loads(body)
    except ValueError:
        raise StatusError(f"{path}: the answer is not JSON: {body[:200]!r}") from None
    if response.status != 200 or not isinstance(document, dict):
        reason = document.get("error") if isinstance(document, dict) else document
        raise StatusError(f"{path}: the agent answered {response.status}: {reason}")
    return document
