"""Exact event-time ranges (issue 29): Client.read(start=, end=) returns
exactly the rows whose event_time lies in [start, end), at block edges, as
the Go client reads them and resumable from a saved state.

The session's stack (conftest.py) holds one event a second from
2026-01-01T00:00:00Z sealed into blocks of at most 2,000 rows per hourly
window: [00:00:00, 00:33:20), [00:33:20, 01:00:00), [01:00:00, 01:33:20),
[01:33:20, 01:40:00). The reference is the pipeline read whole over its
submitted range (every block whole, untrimmed) with event_time as a label
column, filtered here with pyarrow.compute.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from conftest import END, START
from sig_client import ReadState

LABELS = ("event_time", "click")


def _us(t: str) -> int:
    return int(dt.datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() * 1_000_000)


def _table(stream) -> pa.Table:
    batches = list(stream)
    return pa.Table.from_batches(batches, schema=stream.schema)


@pytest.fixture(scope="module")
def whole(stack, ctr_pipeline):
    """The pipeline read over its submitted range: every row of every block,
    event_time beside event_id."""
    client, pipeline = ctr_pipeline
    c = stack.client("trainer-" + client)
    try:
        t = _table(c.read(client, pipeline, start=START, end=END, labels=LABELS))
    finally:
        c.close()
    assert t.num_rows == 6000
    return t


def _expect(whole: pa.Table, start: str, end: str) -> pa.Table:
    et = whole.column("event_time")
    return whole.filter(pc.and_(pc.greater_equal(et, _us(start)), pc.less(et, _us(end))))


# (start, end, rows): ranges starting and ending on a block's first event,
# just past its last, inside one block, spanning blocks (the middle one
# whole), and between two events.
EDGES = [
    ("2026-01-01T00:30:00Z", "2026-01-01T00:31:00Z", 60),     # the minute, inside block 0
    ("2026-01-01T00:00:00Z", "2026-01-01T00:33:20Z", 2000),   # block 0 exactly
    ("2026-01-01T00:33:20Z", "2026-01-01T00:40:00Z", 400),    # starts on block 1's first event
    ("2026-01-01T00:30:00Z", "2026-01-01T00:33:20Z", 200),    # ends on block 1's first event: out
    ("2026-01-01T00:33:19Z", "2026-01-01T00:33:21Z", 2),      # block 0's last event, block 1's first
    ("2026-01-01T00:59:30Z", "2026-01-01T01:33:21Z", 2031),   # block 1's tail, block 2 whole, block 3's first
    ("2026-01-01T00:30:00.200Z", "2026-01-01T00:30:00.800Z", 0),  # between two events
]


@pytest.mark.parametrize("start,end,rows", EDGES)
def test_range_at_block_edges(stack, ctr_pipeline, whole, start, end, rows):
    client, pipeline = ctr_pipeline
    c = stack.client("trainer-" + client)
    try:
        got = _table(c.read(client, pipeline, start=start, end=end, labels=LABELS, batch_rows=128))
    finally:
        c.close()
    want = _expect(whole, start, end)
    assert want.num_rows == rows, "the stack's events are not where this test assumes"
    assert got.num_rows == rows
    assert got.equals(want), f"[{start}, {end}): the rows differ from the whole read's rows in the range"
    et = got.column("event_time")
    if rows:
        assert pc.min(et).as_py() >= _us(start) and pc.max(et).as_py() < _us(end)


def test_range_equals_go_client(stack, ctr_pipeline, tmp_path):
    """The Go client (sigctl read --range) reads the same bytes for a range
    cutting two blocks: both build the units the same way, and the readers
    trim them."""
    client, pipeline = ctr_pipeline
    start, end = "2026-01-01T00:30:00Z", "2026-01-01T00:35:00Z"
    out = str(tmp_path / "go")
    subprocess.run([os.path.join(stack.bin, "sigctl"), "read", "--sigd", stack.sigd_addr,
                    "--token", stack.tokens["trainer-" + client], "--client", client, "--pipeline", pipeline,
                    "--readers", ",".join(stack.reader_addrs), "--out", out, "--batch-rows", "64",
                    "--range", f"{start}:{end}"], check=True, stdout=subprocess.DEVNULL)
    go = []
    for d in sorted(os.listdir(out)):
        for p in sorted(os.listdir(os.path.join(out, d))):
            if p.endswith(".arrows"):
                with open(os.path.join(out, d, p), "rb") as f:
                    go.append(pa.ipc.open_stream(f.read()).read_all())
    c = stack.client("trainer-" + client)
    try:
        py = _table(c.read(client, pipeline, start=start, end=end, batch_rows=64))
    finally:
        c.close()
    assert py.num_rows == 300
    assert pa.concat_tables(go).equals(py)


def test_trimmed_range_resumes_exactly_once(stack, ctr_pipeline, whole, tmp_path):
    """A read of a range cutting two blocks, stopped mid-block and resumed
    from its saved state in a new Stream, delivers every row in the range
    exactly once: the state counts the trimmed unit's rows."""
    client, pipeline = ctr_pipeline
    start, end = "2026-01-01T00:32:00Z", "2026-01-01T00:34:00Z"
    c = stack.client("trainer-" + client)
    try:
        s = c.read(client, pipeline, start=start, end=end, labels=LABELS, batch_rows=25)
        first = []
        for b in s:
            first.append(b)
            if len(first) == 2:  # 50 of block 0's 80 rows in the range
                break
        path = str(tmp_path / "state.json")
        s.state.save(path)
        rest = list(c.read(state=ReadState.load(path)))
    finally:
        c.close()
    got = pa.Table.from_batches(first + rest)
    want = _expect(whole, start, end)
    assert want.num_rows == 120
    assert got.equals(want)
    assert len(set(got.column("event_id").to_pylist())) == 120
