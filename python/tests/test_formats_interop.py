"""pyarrow, an Arrow implementation SIG does not contain, reads what SIG
writes at its edges (issue 19, "standard formats at the edges"):

  * a pipeline's inputs exported by `sigctl export` as Parquet and as an
    Arrow IPC file,
  * a memo object exported the same two ways,
  * a memo object as stored in the warehouse, its value segment with Arrow
    IPC buffer compression (LZ4 frame): each column segment, cut out of the
    object by the footer's offsets, is an Arrow IPC file on its own
    (warehouse/block's layout),

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


def test_memo_segments(exported):
    """Each column segment of a stored memo object is an Arrow IPC file
    pyarrow opens: the footer (JSON, located by the 16-byte trailer: its
    length, its CRC-32C, "SIGBLK01") gives every column's offset and
    length."""
    out, exp = exported
    with open(os.path.join(out, "memo_object.bin"), "rb") as f:
        obj = f.read()
    flen, _crc, magic = struct.unpack("<II8s", obj[-16:])
    assert magic == b"SIGBLK01"
    footer = json.loads(obj[len(obj) - 16 - flen:len(obj) - 16])
    cols = footer["columns"]
    assert [c["name"] for c in cols] == exp["memo_columns"]
    assert [c.get("compression") for c in cols] == [None, "lz4_frame"], "TestExport writes LZ4 value segments"
    for c in cols:
        seg = obj[c["offset"]:c["offset"] + c["length"]]
        t = ipc.open_file(pa.BufferReader(seg)).read_all()
        assert t.column_names == [c["name"]]
        same(t.column(0).to_pylist(), exp["memo"][c["name"]], f"segment {c['name']} of {exp['memo_key']}")
