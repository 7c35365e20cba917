"""Writes the raw block objects of TestRunnerForeignEncodings with pyarrow,
an Arrow implementation SIG does not contain: the block object layout of
warehouse/block (one Arrow IPC file per column, laid end to end 8-byte
aligned, then a JSON footer and a 16-byte trailer), as another program that
ingests events into SIG's warehouse would write it. Every object holds the
same 300 Ads events of one block; they differ only in how their string
columns are encoded:

    block_utf8.arrow          utf8, one record batch per segment
    block_dict_int32.arrow    dictionary<int32, utf8> (as Arrow JS writes strings)
    block_large_utf8.arrow    large_utf8
    block_string_view.arrow   string_view, two record batches per segment

The footer names each column's DSL type ("string"); the segment's own Arrow
schema says how it is encoded. Run from the repository root (the files are
committed; run again only to change them):

    python3.11 -m venv /tmp/venv && /tmp/venv/bin/pip install pyarrow==17.0.0
    /tmp/venv/bin/python workers/memo/testdata/foreign/make_blocks.py
"""

import hashlib
import io
import json
import os
import random
import struct

import pyarrow as pa
import pyarrow.ipc as ipc

HERE = os.path.dirname(os.path.abspath(__file__))
ROWS = 300
WINDOW_START = 1767225600000000  # 2026-01-01T00:00:00Z
BLOCK_ID = "20260101T000000Z-p00000-%020d-%020d" % (0, ROWS - 1)

# The Ads schema (transform.AdsSchema) and its fingerprint
# (transform.Schema.Fingerprint).
SCHEMA = [("event_id", "int64"), ("event_time", "int64"), ("query", "string"), ("ad_title", "string"),
          ("ad_category", "string"), ("advertiser_id", "int64"), ("country", "string"), ("device", "string"),
          ("bid_price", "float64"), ("click", "int64"), ("conversion", "int64")]


def fingerprint():
    h = hashlib.sha256(b"sig.schema.v1\x00ads\x00")
    for name, typ in SCHEMA:
        h.update(name.encode() + b"\x00" + typ.encode() + b"\x00")
    return h.hexdigest()


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def events():
    rng = random.Random(21)
    words = ["red", "Shoes", "running", "cheap", "flights", "to", "Paris", "über", "café", "日本", "a-very-long-token-beyond-twelve"]

    def text(lo, hi):
        return " ".join(rng.choice(words) for _ in range(rng.randint(lo, hi)))

    ids = list(range(1, ROWS + 1))
    return {
        "event_id": ids,
        "event_time": [WINDOW_START + 1000 * i for i in ids],
        "query": [None if i % 17 == 0 else text(0, 5) for i in ids],
        "ad_title": [text(1, 8) for _ in ids],
        "ad_category": [None if i % 23 == 0 else rng.choice(["shoes", "travel", "food", "books"]) for i in ids],
        "advertiser_id": [rng.randint(1, 50) for _ in ids],
        "country": [rng.choice(["us", "fr", "jp"]) for _ in ids],
        "device": [rng.choice(["mobile", "desktop"]) for _ in ids],
        "bid_price": [rng.random() * 5 for _ in ids],
        "click": [rng.randint(0, 1) for _ in ids],
        "conversion": [rng.randint(0, 1) for _ in ids],
    }


def segment(name, arrays):
    """One column as an Arrow IPC file: one record batch per array."""
    sink = io.BytesIO()
    schema = pa.schema([pa.field(name, arrays[0].type, nullable=name not in ("event_id", "event_time"))])
    with ipc.new_file(sink, schema) as w:
        for a in arrays:
            w.write_batch(pa.record_batch([a], schema=schema))
    return sink.getvalue()


def dictionary(values):
    """values dictionary-encoded with int32 indices, as Arrow JS's
    tableFromArrays encodes strings."""
    return pa.array(values, pa.string()).dictionary_encode()


def write(name, encode, batches=1):
    ev = events()
    data = bytearray()
    columns = []
    for col, typ in SCHEMA:
        vals = ev[col]
        if typ == "string":
            step = (ROWS + batches - 1) // batches
            arrays = [encode(vals[lo:lo + step]) for lo in range(0, ROWS, step)]
            if isinstance(arrays[0].type, pa.DictionaryType):
                # The IPC file format allows one dictionary per column.
                arrays = [encode(vals)]
        else:
            arrays = [pa.array(vals, pa.int64() if typ == "int64" else pa.float64())]
        seg = segment(col, arrays)
        while len(data) % 8:
            data.append(0)
        columns.append({"name": col, "type": typ, "offset": len(data), "length": len(seg), "crc32c": crc32c(seg)})
        data += seg
    footer = json.dumps({
        "format": 1, "key": "raw/ads/%s.arrow" % BLOCK_ID, "id": BLOCK_ID, "source": "ads",
        "window_start": WINDOW_START, "window_length": 3600000000,
        "min_event_time": min(ev["event_time"]), "max_event_time": max(ev["event_time"]), "rows": ROWS,
        "schema_fingerprint": fingerprint(), "columns": columns,
    }, separators=(",", ":")).encode()
    data += footer
    data += struct.pack("<II", len(footer), crc32c(footer)) + b"SIGBLK01"
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)


if __name__ == "__main__":
    write("block_utf8.arrow", lambda v: pa.array(v, pa.string()))
    write("block_dict_int32.arrow", dictionary)
    write("block_large_utf8.arrow", lambda v: pa.array(v, pa.large_string()))
    write("block_string_view.arrow", lambda v: pa.array(v, pa.string_view()), batches=2)
