"""pyarrow, an Arrow implementation SIG does not contain, reads what SIG
writes at its edges (issue 19, "standard formats at the edges"):

  * a pipeline's inputs exported by `sigctl export` as Parquet and as an
    Arrow IPC file,
  * a memo object exported the same two ways,
  * a memo object as stored in the warehouse, its value segment with Arrow
    IPC buffer compression (LZ4 frame): each column segment, cut out of the
    object by the footer's offsets, is an Arrow IPC file on its own
    (warehouse/block's layout),
  * a memo object whose list<int64> value is stored narrow (issue 28): its
    segment is an Arrow IPC file of the stored type (list<int16>), the
    footer giving the declared type and the stored one,

with values equal to the Go side's. The Go side is cmd/sigctl's TestExport
(a real sigd, MinIO and reader): run with SIG_EXPORT_INTEROP_DIR set, it
leaves the files there with expected.json, the values the Go client read.
Needs go on PATH and a MinIO binary ($SIG_MINIO_BIN, default the
repository's bin/minio).
"""

from __future__ import annotations

import json
import math
import os
import struct
import subprocess

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("export"))
    env = dict(os.environ, SIG_EXPORT_INTEROP_DIR=out)
    env.setdefault("SIG_MINIO_BIN", os.path.join(REPO, "bin", "minio"))
    subprocess.run(["go", "test", "-count=1", "-run", "^TestExport$", "./cmd/sigctl/"], cwd=REPO, env=env,
                   check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "expected.json")) as f:
        return out, json.load(f)


def same(got: list, want: list, what: str):
    assert len(got) == len(want), f"{what}: {len(got)} values, want {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        if isinstance(w, float) and isinstance(g, float):
            assert g == w or (math.isnan(g) and math.isnan(w)), f"{what}[{i}]: {g!r}, want {w!r}"
        else:
            assert g == w, f"{what}[{i}]: {g!r}, want {w!r}"


def check(table: pa.Table, want: dict, columns: list, what: str):
    assert table.column_names == columns, f"{what}: columns {table.column_names}, want {columns}"
    for name in columns:
        same(table.column(name).to_pylist(), want[name], f"{what} {name}")


@pytest.mark.parametrize("kind", ["pipeline", "memo"])
def test_parquet(exported, kind):
    out, exp = exported
    t = pq.read_table(os.path.join(out, kind + ".parquet"))
    check(t, exp[kind], exp[kind + "_columns"], kind + ".parquet")


@pytest.mark.parametrize("kind", ["pipeline", "memo"])
def test_arrow_file(exported, kind):
    out, exp = exported
    with pa.memory_map(os.path.join(out, kind + ".arrow")) as src:
        t = ipc.open_file(src).read_all()
    check(t, exp[kind], exp[kind + "_columns"], kind + ".arrow")


def footer_columns(obj: bytes) -> list:
    """The column directory of a block object's footer (JSON, located by
    the 16-byte trailer: its length, its CRC-32C, "SIGBLK01")."""
    flen, _crc, magic = struct.unpack("<II8s", obj[-16:])
    assert magic == b"SIGBLK01"
    return json.loads(obj[len(obj) - 16 - flen:len(obj) - 16])["columns"]


# Arrow types of the stored type names a footer gives (Column.Stored).
STORED = {"int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(),
          "uint8": pa.uint8(), "uint16": pa.uint16(), "uint32": pa.uint32()}


def stored_type(name: str) -> pa.DataType:
    if name.startswith("list<") and name.endswith(">"):
        return pa.list_(STORED[name[5:-1]])
    return STORED[name]


@pytest.mark.parametrize("kind,stored", [("memo", None), ("memo_narrow", "list<int16>")])
def test_memo_segments(exported, kind, stored):
    """Each column segment of a stored memo object (a pack: event_id, then
    the members a batch wrote, issue 28) is an Arrow IPC file pyarrow
    opens, at the offset and length the footer gives. A value stored narrow
    is read in its stored type (the footer's "stored"; its "type" is the
    declared list<int64>) with the values the Go side widened it to;
    event_id is never narrowed nor compressed (it is the raw block's)."""
    out, exp = exported
    with open(os.path.join(out, kind + "_object.bin"), "rb") as f:
        obj = f.read()
    cols = footer_columns(obj)
    assert [c["name"] for c in cols] == exp[kind + "_columns"]
    assert cols[0]["name"] == "event_id" and cols[0].get("compression") is None and cols[0].get("stored") is None
    assert len(cols) >= 2 and all(c.get("compression") == "lz4_frame" for c in cols[1:]), "TestExport writes LZ4 value segments"
    if stored is not None:
        assert stored in [c.get("stored") for c in cols[1:]], [c.get("stored") for c in cols]
    for c in cols:
        seg = obj[c["offset"]:c["offset"] + c["length"]]
        t = ipc.open_file(pa.BufferReader(seg)).read_all()
        assert t.column_names == [c["name"]]
        if "stored" in c:
            assert c["type"] == "list<int64>"
            assert t.schema.field(0).type == stored_type(c["stored"]), f"{c['name']}: {t.schema.field(0).type}"
        same(t.column(0).to_pylist(), exp[kind][c["name"]], f"segment {c['name']} of {exp[kind + '_key']}")
