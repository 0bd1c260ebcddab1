"""ttrpc's framing (github.com/containerd/ttrpc, channel.go): a 10-byte header
(length uint32, stream id uint32, type byte, flags byte; big-endian) before a
protobuf Request or Response. Bytes in, messages out; no sockets here.

A message longer than ttrpc's limit (4 MiB) is skipped without buffering it and
reported as Oversize, so the caller can answer RESOURCE_EXHAUSTED on its stream
as ttrpc itself does; the stream stays usable.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

HEADER = struct.Struct(">IIBB")
HEADER_LEN = HEADER.size  # 10
MAX_MESSAGE = 4 << 20

TYPE_REQUEST = 0x1
TYPE_RESPONSE = 0x2
TYPE_DATA = 0x3  # streaming data: NRI uses no streams

# gRPC status codes ttrpc answers with (google.rpc.Code).
OK = 0
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
FAILED_PRECONDITION = 9
ABORTED = 10
RESOURCE_EXHAUSTED = 8
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14


class TtrpcError(Exception):
    """A stream that is not ttrpc; the logical connection is unusable."""


@dataclass(frozen=True, slots=True)
class Message:
    stream_id: int
    type: int
    flags: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class Oversize:
    """A message that exceeded the limit was skipped; answer on its stream."""

    stream_id: int
    type: int
    length: int


def encode(stream_id: int, kind: int, payload: bytes, flags: int = 0) -> bytes:
    if len(payload) > MAX_MESSAGE:
        raise TtrpcError(f"message of {len(payload)} bytes exceeds ttrpc's {MAX_MESSAGE}")
    return HEADER.pack(len(payload), stream_id, kind, flags) + payload


class Reader:
    """One logical connection's bytes in (any split), messages out."""

    def __init__(self, max_message: int = MAX_MESSAGE) -> None:
        self._max = max_message
        self._buf = bytearray()
        self._skip = 0  # bytes of an oversize message still to drop

    def feed(self, data: bytes) -> Iterator[Message | Oversize]:
        if self._skip:
            dropped = min(self._skip, len(data))
            self._skip -= dropped
            data = data[dropped:]
        self._buf += data
        while len(self._buf) >= HEADER_LEN:
            length, stream_id, kind, flags = HEADER.unpack_from(self._buf)
            if length > self._max:
                del self._buf[:HEADER_LEN]
                dropped = min(length, len(self._buf))
                del self._buf[:dropped]
                self._skip = length - dropped
                yield Oversize(stream_id, kind, length)
                if self._skip:
                    return
                continue
            if len(self._buf) < HEADER_LEN + length:
                return
            payload = bytes(self._buf[HEADER_LEN : HEADER_LEN + length])
            del self._buf[: HEADER_LEN + length]
            yield Message(stream_id, kind, flags, payload)

    def pending(self) -> int:
        """Bytes of an incomplete message held or still to skip."""
        return len(self._buf) + self._skip
