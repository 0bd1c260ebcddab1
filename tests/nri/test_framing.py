"""NRI's multiplexer frames and ttrpc's messages as tables: any split of the bytes,
frames of both logical connections interleaved, oversize frames and messages, and
a peer that stops inside one."""

from __future__ import annotations

import struct

import pytest

from agent.nri import mux, ttrpc


def _split(data: bytes, sizes: tuple[int, ...]) -> list[bytes]:
    """`data` cut after each size in turn (the rest in one piece)."""
    parts, at = [], 0
    for size in sizes:
        parts.append(data[at : at + size])
        at += size
    parts.append(data[at:])
    return [p for p in parts if p]


# -- mux ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("conn_id", "payload", "expected"),
    [
        (1, b"", b"\x00\x00\x00\x01\x00\x00\x00\x00"),
        (2, b"ab", b"\x00\x00\x00\x02\x00\x00\x00\x02ab"),
        (0x01020304, b"x", b"\x01\x02\x03\x04\x00\x00\x00\x01x"),
    ],
)
def test_mux_header_is_big_endian_id_then_length(
    conn_id: int, payload: bytes, expected: bytes
) -> None:
    assert mux.encode(conn_id, payload) == expected


def test_mux_splits_a_payload_over_the_limit_into_frames() -> None:
    data = bytes(range(10))
    encoded = mux.encode(1, data, max_payload=4)
    frames = list(mux.Deframer(max_payload=4).feed(encoded))
    assert [len(f.payload) for f in frames] == [4, 4, 2]
    assert b"".join(f.payload for f in frames) == data


TRUNK = (
    mux.encode(1, b"request-1")
    + mux.encode(2, b"resp")
    + mux.encode(1, b"")
    + mux.encode(2, b"x" * 300)
)
EXPECTED = [(1, b"request-1"), (2, b"resp"), (1, b""), (2, b"x" * 300)]


@pytest.mark.parametrize(
    "sizes",
    [
        (),  # all at once
        (1,) * len(TRUNK),  # one byte at a time
        (3,),  # inside the first header
        (8,),  # exactly one header
        (12, 5),  # inside a payload, then the next header
        (17, 8, 100),
    ],
    ids=["whole", "bytewise", "mid-header", "header-only", "mid-payload", "mixed"],
)
def test_mux_frames_survive_any_split_and_keep_their_connection(sizes: tuple[int, ...]) -> None:
    deframer = mux.Deframer()
    frames = [f for part in _split(TRUNK, sizes) for f in deframer.feed(part)]
    assert [(f.conn_id, f.payload) for f in frames] == EXPECTED
    assert deframer.pending() == 0
    deframer.check_eof()  # ended between frames: fine


def test_mux_refuses_an_oversize_frame_before_buffering_it() -> None:
    deframer = mux.Deframer(max_payload=16)
    with pytest.raises(mux.MuxError, match="announces 17 bytes, more than the limit of 16"):
        list(deframer.feed(struct.pack(">II", 1, 17)))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x00\x00\x00", "inside a frame header (3 of 8 bytes)"),
        (mux.encode(2, b"abcdef")[:-2], "connection 2 (4 of 6 payload bytes)"),
    ],
    ids=["mid-header", "mid-payload"],
)
def test_mux_peer_closing_mid_frame_is_named(data: bytes, message: str) -> None:
    deframer = mux.Deframer()
    assert list(deframer.feed(data)) == []
    with pytest.raises(mux.MuxError, match=message.replace("(", r"\(").replace(")", r"\)")):
        deframer.check_eof()


# -- ttrpc ----------------------------------------------------------------------------


def test_ttrpc_header_is_length_stream_type_flags() -> None:
    assert ttrpc.encode(3, ttrpc.TYPE_RESPONSE, b"hi", flags=4) == (
        b"\x00\x00\x00\x02\x00\x00\x00\x03\x02\x04hi"
    )


STREAM = (
    ttrpc.encode(1, ttrpc.TYPE_REQUEST, b"first")
    + ttrpc.encode(3, ttrpc.TYPE_REQUEST, b"")
    + ttrpc.encode(5, 0x7F, b"from the future")  # a type this side does not know
    + ttrpc.encode(7, ttrpc.TYPE_RESPONSE, b"z" * 50)
)


@pytest.mark.parametrize("sizes", [(), (1,) * len(STREAM), (9,), (10,), (13, 4), (25, 30)])
def test_ttrpc_messages_survive_any_split(sizes: tuple[int, ...]) -> None:
    reader = ttrpc.Reader()
    items = [m for part in _split(STREAM, sizes) for m in reader.feed(part)]
    assert items == [
        ttrpc.Message(1, ttrpc.TYPE_REQUEST, 0, b"first"),
        ttrpc.Message(3, ttrpc.TYPE_REQUEST, 0, b""),
        ttrpc.Message(5, 0x7F, 0, b"from the future"),
        ttrpc.Message(7, ttrpc.TYPE_RESPONSE, 0, b"z" * 50),
    ]
    assert reader.pending() == 0


@pytest.mark.parametrize("sizes", [(), (1,) * 60, (12,), (20, 20)])
def test_ttrpc_oversize_message_is_skipped_and_the_stream_goes_on(sizes: tuple[int, ...]) -> None:
    big = struct.pack(">IIBB", 40, 9, ttrpc.TYPE_REQUEST, 0) + b"B" * 40
    after = ttrpc.encode(11, ttrpc.TYPE_REQUEST, b"next")
    reader = ttrpc.Reader(max_message=32)
    items = [m for part in _split(big + after, sizes) for m in reader.feed(part)]
    assert items == [
        ttrpc.Oversize(9, ttrpc.TYPE_REQUEST, 40),
        ttrpc.Message(11, ttrpc.TYPE_REQUEST, 0, b"next"),
    ]


def test_ttrpc_refuses_to_send_an_oversize_message() -> None:
    with pytest.raises(ttrpc.TtrpcError, match="exceeds ttrpc's"):
        ttrpc.encode(1, ttrpc.TYPE_REQUEST, b"x" * (ttrpc.MAX_MESSAGE + 1))


def test_interleaved_logical_connections_reassemble_separately() -> None:
    """A message of each connection cut in two, the halves interleaved on the trunk."""
    one = ttrpc.encode(1, ttrpc.TYPE_REQUEST, b"to the plugin")
    two = ttrpc.encode(1, ttrpc.TYPE_RESPONSE, b"to the runtime")
    trunk = (
        mux.encode(1, one[:7])
        + mux.encode(2, two[:12])
        + mux.encode(1, one[7:])
        + mux.encode(2, two[12:])
    )
    readers = {1: ttrpc.Reader(), 2: ttrpc.Reader()}
    out = [
        (frame.conn_id, msg)
        for frame in mux.Deframer().feed(trunk)
        for msg in readers[frame.conn_id].feed(frame.payload)
    ]
    assert out == [
        (1, ttrpc.Message(1, ttrpc.TYPE_REQUEST, 0, b"to the plugin")),
        (2, ttrpc.Message(1, ttrpc.TYPE_RESPONSE, 0, b"to the runtime")),
    ]
