"""systemd's readiness protocol: send "READY=1" to $NOTIFY_SOCKET (Type=notify units).

A few lines instead of a dependency; a no-op when not started by systemd.
"""

from __future__ import annotations

import os
import socket


def notify(message: str, environ: dict[str, str] | None = None) -> bool:
    """Send `message` (e.g. "READY=1", "STOPPING=1") to systemd; False when not under systemd."""
    env = os.environ if environ is None else environ
    address = env.get("NOTIFY_SOCKET", "")
    if not address:
        return False
    if address.startswith("@"):  # abstract namespace socket
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
        sock.connect(address)
        sock.sendall(message.encode())
    return True
