"""The Python client against a real SIG stack (conftest.py): submit, wait,
read through Arrow Flight with the Go client's bytes, resume after a reader
is killed and after the process restarts, typed errors."""

from __future__ import annotations

import os
import subprocess
import time
import sys

import numpy as np
import pyarrow as pa
import pytest

import sig_client
from sig_client import errors
from sig_client.arrays import to_numpy
from conftest import CTR_GRAPH, END, EVENTS, ROWS_PER_BLOCK, START, go_read, ipc_parts, received_body


def assert_same_as_go(batches, units):
    """batches (pyarrow, as the Flight client decoded them) are the Go
    client's units' batches: the same schema and values, and the same bytes
    on the wire (each FlightData body is the body of the Go client's IPC
    message; only the flatbuffer headers, built by different builders, may
    differ in layout)."""
    want = [b for _, bs in units for b in bs]
    assert len(batches) == len(want)
    for i, (got, raw) in enumerate(zip(batches, want)):
        schema, batch, body = ipc_parts(raw)
        assert got.schema.equals(schema, check_metadata=True), f"batch {i}: schema {got.schema} != {schema}"
        assert got.equals(batch), f"batch {i}: values differ"
        assert received_body(got) == body, f"batch {i}: body bytes differ"


def test_submit_wait_read_equals_go_client(stack, tmp_path):
    c = stack.client()
    resp = c.submit(CTR_GRAPH, client="ctr", pipeline="equal", start=START, end=END)
    assert len(resp.solution.inputs) == 5
    seen = []
    sol = c.wait("ctr", "equal", timeout=120, progress=seen.append)
    assert sol.complete and sol.blocks_pending == 0
    assert seen and seen[-1].complete and seen[-1].ready == seen[-1].total == 5 * 4
    assert str(seen[-1]) == "20/20 blocks ready, 0 pending, 0 failed"

    stream = c.read("ctr", "equal", batch_rows=500)
    batches = list(stream)
    assert len(stream.info.endpoints) == 4
    assert stream.schema.names == ["event_id", "click", "conversion", "overlap", "query", "category", "device", "price"]
    assert sum(b.num_rows for b in batches) == EVENTS == stream.state.rows
    ids = np.concatenate([b.column("event_id").to_numpy() for b in batches])
    assert len(np.unique(ids)) == EVENTS
    assert_same_as_go(batches, go_read(stack, str(tmp_path), "ctr", "equal", batch_rows=500))
    assert stream.state.block_index == 4 and stream.state.row == 0
    c.close()


def test_numpy(stack, ctr_pipeline):
    c = stack.client()
    batch = next(iter(c.read(*ctr_pipeline, batch_rows=300)))
    d = to_numpy(batch)
    assert d["event_id"].dtype == np.int64 and len(d["event_id"]) == 300
    q = d["query"]
    assert q["offsets"][0] == 0 and len(q["offsets"]) == 301 and q["offsets"][-1] == len(q["values"])
    for i, row in enumerate(batch.column("query").to_pylist()):
        assert list(q["values"][q["offsets"][i]:q["offsets"][i + 1]]) == (row or [])
    # Stream.numpy gives the same dicts.
    d2 = next(c.read(*ctr_pipeline, batch_rows=300).numpy())
    assert np.array_equal(d2["query"]["values"], q["values"])
    c.close()


def test_jax(stack, ctr_pipeline):
    pytest.importorskip("jax")
    from sig_client.jax_input import JaxIterator

    c = stack.client()
    stream = c.read(*ctr_pipeline, batch_rows=512)
    it = JaxIterator(stream, batch_rows=512, values_bucket=256)
    shapes = set()
    rows = 0
    for x in it:
        rows += int(x["weight"].sum())
        shapes.add((x["click"].shape, x["query"]["values"].shape[0] % 256, x["query"]["segment_ids"].shape))
        seg = np.asarray(x["query"]["segment_ids"])
        off = np.asarray(x["query"]["offsets"])
        n = int(x["weight"].sum())
        # Each value's segment is its row; padding points one past the last row.
        assert np.array_equal(seg[: off[n]], np.repeat(np.arange(n), np.diff(off[: n + 1])))
        assert (seg[off[n]:] == 512).all()
    assert rows == EVENTS and it.state.rows == EVENTS
    assert {s[0] for s in shapes} == {(512,)} and {s[1] for s in shapes} == {0}
    assert x["event_id"].dtype == np.int64 and x["query"]["values"].dtype == np.int32
    c.close()


def test_jax_refuses_ids_beyond_int32():
    """Without jax_enable_x64 an id that does not fit int32 is an error
    naming its column, not a wrapped id."""
    pytest.importorskip("jax")
    from sig_client.jax_input import JaxIterator

    ok = pa.record_batch({"event_id": pa.array([2**40], pa.int64()), "q": pa.array([[1, 2]], pa.list_(pa.int64()))})
    x = next(iter(JaxIterator([ok], batch_rows=4, values_bucket=4)))
    assert int(x["event_id"][0]) == 2**40 and list(np.asarray(x["q"]["values"])) == [1, 2, 0, 0]
    big = pa.record_batch({"event_id": pa.array([1], pa.int64()), "q": pa.array([[1, 2**33]], pa.list_(pa.int64()))})
    with pytest.raises(ValueError, match="'q.values'"):
        next(iter(JaxIterator([big], batch_rows=4, values_bucket=4)))


CHILD = """
import sys
import pyarrow as pa
import sig_client
state = sig_client.ReadState.load(sys.argv[1])
c = sig_client.Client(readers=sys.argv[2].split(","), token=sys.argv[3])
stream = c.read(state=state)
with pa.OSFile(sys.argv[4], "wb") as f:
    w = None
    for b in stream:
        if w is None:
            w = pa.ipc.new_stream(f, b.schema)
        w.write_batch(b)
    w.close()
"""


def test_state_survives_process_restart(stack, ctr_pipeline, tmp_path):
    """A read stopped mid-block (its state saved) continues in another
    process from the saved state: together they deliver every batch once."""
    c = stack.client()
    want = list(c.read(*ctr_pipeline, batch_rows=256))
    stream = c.read(*ctr_pipeline, batch_rows=256)
    first = []
    path = str(tmp_path / "state.json")
    for b in stream:
        first.append(b)
        stream.state.save(path)
        if len(first) == 11:  # block 1, mid-block
            break
    st = sig_client.ReadState.load(path)
    assert st.block_index == 1 and st.row > 0 and st.rows == sum(b.num_rows for b in first)
    out = str(tmp_path / "rest.arrows")
    subprocess.run([sys.executable, "-c", CHILD, path, ",".join(stack.reader_addrs), stack.tokens["trainer-ctr"], out],
                   check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    rest = list(pa.ipc.open_stream(out))
    got = first + rest
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.equals(b), f"batch {i} differs"
    c.close()


def test_reader_killed_mid_stream_is_resumed(stack, ctr_pipeline, tmp_path):
    """SIGKILL the reader a block is being read from after its first batch:
    the stream resumes on the other reader from the first row not yet
    delivered, and the batches are the Go client's, none lost or twice."""
    want = go_read(stack, str(tmp_path), *ctr_pipeline, batch_rows=10)
    # Without BDP probing the client reads 16 KiB ahead of its consumer at
    # most, so that a block (about 200 KiB in batches of 10 rows) is still
    # being sent when its reader dies.
    c = stack.client(flight_options=[("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 16384)])
    stream = c.read(*ctr_pipeline, batch_rows=10)
    got = []
    killed = None
    for b in stream:
        got.append(b)
        if killed is None and stream.state.block_index == 1 and stream.state.row == 10:
            killed = stack.reader_addrs.index(stream.location.removeprefix("grpc+tcp://"))
            stack.readers[killed].kill()
            stack.start_reader(killed)
    assert killed is not None
    assert c.stats["resumes"] >= 1, c.stats
    assert_same_as_go(got, want)
    c.close()


def test_memo_pending_is_typed_error(stack):
    """With no worker running, a new graph's memo objects stay pending: a
    MEMO read raises MemoPendingError (UNAVAILABLE, naming the input and
    block), ready_else_local reads every row at once, and once the workers
    are back the MEMO read succeeds."""
    c = stack.client()
    stack.stop_workers()
    try:
        c.submit('input title_ids = hash(unigrams(lower(col("ad_title"))), buckets=777)', client="ctr",
                 pipeline="pending", start=START, end=END)
        with pytest.raises(sig_client.MemoPendingError) as ei:
            list(c.read("ctr", "pending"))
        e = ei.value
        assert e.code == "UNAVAILABLE" and "memo pending" in e.message
        assert e.retryable and isinstance(e, sig_client.SigError)
        assert e.input == "title_ids" and e.block and e.component, e.metadata
        rows = sum(b.num_rows for b in c.read("ctr", "pending", mode="ready_else_local"))
        assert rows == EVENTS
        watch = c.watch("ctr", "pending", timeout=120)
        seen = [next(watch)]
    finally:
        stack.start_workers()
    # The watch, begun while nothing could be memoized, reports the blocks
    # turning ready (its changes applied to the first full solution).
    for p in watch:
        seen.append(p)
        if p.complete:
            break
    watch.close()
    assert seen[0].pending == 4 and seen[-1].complete and seen[-1].ready == 4, [str(p) for p in seen]
    assert sum(b.num_rows for b in c.read("ctr", "pending")) == EVENTS
    c.close()


def test_typed_errors(stack, ctr_pipeline):
    with sig_client.Client(readers=stack.reader_addrs, token="not-a-token") as c:
        with pytest.raises(sig_client.AuthError) as ei:
            list(c.read(*ctr_pipeline))
        assert ei.value.code == "UNAUTHENTICATED"
    with stack.client("trainer-cvr") as c:
        with pytest.raises(sig_client.AuthError) as ei:
            list(c.read(*ctr_pipeline))
        assert ei.value.code == "PERMISSION_DENIED"
    with stack.client() as c:
        with pytest.raises(sig_client.NotFoundError):
            list(c.read("ctr", "no-such-pipeline"))
        with pytest.raises(sig_client.InvalidArgumentError):
            c.read(*ctr_pipeline, mode="lig")
        with pytest.raises(sig_client.AuthError):
            c.submit(CTR_GRAPH, client="cvr", pipeline="x", start=START, end=END)
        with pytest.raises(sig_client.InvalidArgumentError) as ei:
            c.submit("input x = nope(", client="ctr", pipeline="x", start=START, end=END)
        assert ei.value.code == "INVALID_ARGUMENT"
        # A state whose block is not the solution's any more.
        stream = c.read(*ctr_pipeline)
        next(iter(stream))
        st = stream.state.copy()
        st.block_id = "not-the-block"
        with pytest.raises(sig_client.StateMismatchError):
            list(c.read(state=st))
        # A ticket that is no ReadRequest.
        import pyarrow.flight as flight

        fc = flight.FlightClient("grpc+tcp://" + stack.reader_addrs[0])
        try:
            fc.do_get(flight.Ticket(b"\xff\xff"), c._options()).read_all()
        except Exception as e:  # noqa: BLE001
            err = errors.from_flight(e)
            assert isinstance(err, sig_client.InvalidArgumentError) and "ticket" in err.message, err
        else:
            pytest.fail("a malformed ticket was accepted")
        fc.close()


def test_corrupt_memo_object_is_data_loss(stack):
    """A memo object truncated in the store after its block was ready:
    reading the block raises DataLossError (DATA_LOSS), after the blocks
    before it were delivered; the reader reports it to sigd, which
    recomputes the block, and the pipeline then reads whole again."""
    from pyarrow import fs

    c = stack.client()
    c.submit('input cat_ids = hash(col("ad_category"), buckets=991)', client="ctr", pipeline="corrupt",
             start=START, end=END)
    sol = c.wait("ctr", "corrupt", timeout=120)
    key = sol.inputs[0].blocks[1].memo_object
    s3 = fs.S3FileSystem(access_key=stack.dev["s3_access_key"], secret_key=stack.dev["s3_secret_key"],
                         endpoint_override=stack.dev["s3_endpoint"], scheme="http", region="us-east-1")
    with s3.open_input_stream("sig/" + key) as f:
        data = f.read()
    with s3.open_output_stream("sig/" + key) as f:
        f.write(data[: len(data) // 2])
    stream = c.read("ctr", "corrupt")
    with pytest.raises(sig_client.DataLossError) as ei:
        for _ in stream:
            pass
    assert ei.value.code == "DATA_LOSS" and not ei.value.retryable, ei.value
    assert stream.state.block_index == 1 and stream.state.row == 0
    assert stream.state.rows == ROWS_PER_BLOCK  # block 0, delivered whole
    # sigd recomputes the block the reader reported; the read then succeeds.
    c.wait("ctr", "corrupt", timeout=120)
    deadline = time.time() + 60
    while True:
        try:
            assert sum(b.num_rows for b in c.read("ctr", "corrupt")) == EVENTS
            break
        except (sig_client.DataLossError, sig_client.MemoPendingError):
            if time.time() > deadline:
                raise
            time.sleep(0.2)
    c.close()
