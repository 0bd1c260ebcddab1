"""NRI's connection multiplexer (containerd/nri pkg/net/multiplex): one unix
connection carries several logical byte streams, each frame prefixed by an
8-byte header (connection id, payload length; big-endian uint32 each).

Frames in, bytes per logical connection out: no sockets here. A ttrpc message
may span frames and a frame may hold several messages, so the layer above reads
each logical connection as a stream (agent/nri/ttrpc.py).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

HEADER = struct.Struct(">II")
HEADER_LEN = HEADER.size  # 8
PLUGIN_SERVICE_CONN = 1  # the plugin serves, the runtime calls (Configure, CreateContainer...)
RUNTIME_SERVICE_CONN = 2  # the runtime serves, the plugin calls (RegisterPlugin, UpdateContainers)
# Upstream's bound: one ttrpc header plus its largest message (4 MiB).
MAX_PAYLOAD = 10 + (4 << 20)


class MuxError(Exception):
    """The trunk carries something that is not NRI's framing; the connection is unusable."""


@dataclass(frozen=True, slots=True)
class Frame:
    conn_id: int
    payload: bytes


def encode(conn_id: int, data: bytes, max_payload: int = MAX_PAYLOAD) -> bytes:
    """`data` for logical connection `conn_id` as frames of at most `max_payload` bytes."""
    if not data:
        return HEADER.pack(conn_id, 0)
    out = bytearray()
    for start in range(0, len(data), max_payload):
        chunk = data[start : start + max_payload]
        out += HEADER.pack(conn_id, len(chunk))
        out += chunk
    return bytes(out)


class Deframer:
    """Bytes from the trunk in (any split), whole frames out. A header announcing
    more than `max_payload` is refused before anything is buffered for it."""

    def __init__(self, max_payload: int = MAX_PAYLOAD) -> None:
        self._max = max_payload
        self._buf = bytearray()

    def feed(self, data: bytes) -> Iterator[Frame]:
        self._buf += data
        while len(self._buf) >= HEADER_LEN:
            conn_id, size = HEADER.unpack_from(self._buf)
            if size > self._max:
                raise MuxError(
                    f"frame for connection {conn_id} announces {size} bytes, "
                    f"more than the limit of {self._max}"
                )
            if len(self._buf) < HEADER_LEN + size:
                return
            payload = bytes(self._buf[HEADER_LEN : HEADER_LEN + size])
            del self._buf[: HEADER_LEN + size]
            yield Frame(conn_id, payload)

    def pending(self) -> int:
        """Bytes of an incomplete frame held (non-zero at EOF: the peer closed mid-frame)."""
        return len(self._buf)

    def check_eof(self) -> None:
        """The trunk ended: MuxError if it ended inside a frame."""
        if self._buf:
            if len(self._buf) < HEADER_LEN:
                raise MuxError(f"peer closed inside a frame header ({len(self._buf)} of 8 bytes)")
            conn_id, size = HEADER.unpack_from(self._buf)
            raise MuxError(
                f"peer closed inside a frame for connection {conn_id} "
                f"({len(self._buf) - HEADER_LEN} of {size} payload bytes)"
            )
