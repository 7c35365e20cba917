"""Arrow Flight's GetFlightInfo and DoGet over grpcio: the Flight transport
of a Client in a process forked from one that used pyarrow.flight.

pyarrow.flight runs on the gRPC core built into pyarrow. A child forked
while that core's threads were busy inherits their mutexes mid-wait: a new
pyarrow FlightClient there aborts (abseil's "Mutex::Fer while waiting on
Condition") or hangs, whether or not the parent's clients were closed first
(measured: 4 of 30 children). grpcio, whose channels a child opens anew
after fork, carries the same two calls of arrow.flight.protocol.FlightService
as plain protobuf on the wire, decoded here by hand (the FlightInfo by
pyarrow itself), so a forked DataLoader worker reads the same batches.
"""

from __future__ import annotations

import grpc
import pyarrow as pa
import pyarrow.flight as flight

_SERVICE = "/arrow.flight.protocol.FlightService/"


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _bytes_field(num: int, v: bytes) -> bytes:
    return _varint(num << 3 | 2) + _varint(len(v)) + v


def _read_varint(buf: bytes, i: int) -> tuple[int, int]:
    """The varint at buf[i:] and the index after it."""
    v = shift = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def _fields(buf: bytes) -> dict:
    """The length-delimited fields of a protobuf message by number (the
    last of each; FlightData has no repeated one)."""
    out = {}
    i, n = 0, len(buf)
    mv = memoryview(buf)
    while i < n:
        key, i = _read_varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 2:
            ln, i = _read_varint(buf, i)
            out[num] = mv[i:i + ln]
            i += ln
        elif wt == 0:
            _, i = _read_varint(buf, i)
        elif wt == 1:
            i += 8
        elif wt == 5:
            i += 4
        else:
            raise ValueError(f"FlightData: wire type {wt}")
    return out


def _message(header: memoryview, body: memoryview) -> pa.ipc.Message:
    """An Arrow IPC message from FlightData's data_header and data_body."""
    pad = (-len(header)) % 8
    framed = b"".join([b"\xff\xff\xff\xff", (len(header) + pad).to_bytes(4, "little"), header, b"\0" * pad, body])
    return pa.ipc.read_message(pa.py_buffer(framed))


class Chunk:
    """What pyarrow's FlightStreamReader.read_chunk gives: data (a
    RecordBatch) and app_metadata (a pyarrow Buffer, or None)."""

    __slots__ = ("data", "app_metadata")

    def __init__(self, data, app_metadata):
        self.data = data
        self.app_metadata = app_metadata


class StreamReader:
    """A DoGet's batches, read_chunk() as pyarrow's: StopIteration at the
    end; a failed call raises grpc.RpcError."""

    def __init__(self, responses):
        self._it = responses
        self.schema = None

    def read_chunk(self) -> Chunk:
        while True:
            raw = next(self._it)  # StopIteration at the end of the stream
            f = _fields(raw)
            header, body, meta = f.get(2), f.get(1000, memoryview(b"")), f.get(3)
            if header is None or len(header) == 0:
                continue
            msg = _message(header, body)
            if msg.type == "schema":
                self.schema = pa.ipc.read_schema(msg)
                continue
            if self.schema is None:
                raise ValueError("DoGet: a record batch before the schema")
            batch = pa.ipc.read_record_batch(msg, self.schema)
            return Chunk(batch, pa.py_buffer(bytes(meta)) if meta is not None and len(meta) else None)


class Connection:
    """GetFlightInfo and DoGet on one reader over a grpcio channel."""

    def __init__(self, location: str, options=()):
        target = location.split("://", 1)[-1]
        opts = [("grpc.max_receive_message_length", -1)] + [tuple(o) for o in options]
        self.channel = grpc.insecure_channel(target, options=opts)
        ident = lambda b: b  # noqa: E731
        self._info = self.channel.unary_unary(_SERVICE + "GetFlightInfo", request_serializer=ident,
                                              response_deserializer=ident)
        self._get = self.channel.unary_stream(_SERVICE + "DoGet", request_serializer=ident,
                                              response_deserializer=ident)

    def get_flight_info(self, command: bytes, metadata, timeout=None) -> flight.FlightInfo:
        # FlightDescriptor{type: CMD (2), cmd: command}
        req = b"\x08\x02" + _bytes_field(2, command)
        return flight.FlightInfo.deserialize(self._info(req, metadata=metadata, timeout=timeout))

    def do_get(self, ticket: bytes, metadata) -> StreamReader:
        return StreamReader(self._get(_bytes_field(1, ticket), metadata=metadata))

    def close(self) -> None:
        self.channel.close()
