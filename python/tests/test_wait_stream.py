"""Client.wait on a pipeline whose blocks fail (quarantined by sigd after
a worker failed their tasks --max-attempts times) and on one that stays
pending past its timeout; a Stream read again after wait, read_all and len;
numpy output of nulls (a masked array, never a made-up 0)."""

from __future__ import annotations

import time

import grpc
import numpy as np
import pyarrow as pa
import pytest
from google.protobuf import duration_pb2

import sig_client
from sig_client._proto.sig.v1 import sig_pb2, sig_pb2_grpc
from sig_client.arrays import dense, to_numpy
from conftest import END, EVENTS, START


def fail_tasks(stack, keys: set[str], tasks: int, timeout: float = 60) -> list:
    """Plays a memoization worker (the Workers lease protocol, the worker
    token) whose every task fails, until sigd has quarantined `tasks`
    tasks; all must be of the components keys. Returns the quarantined
    (component, block) pairs."""
    ch = grpc.insecure_channel(stack.sigd_addr)
    w = sig_pb2_grpc.WorkersStub(ch)
    md = [("authorization", "Bearer " + stack.tokens["worker"])]
    out = []
    deadline = time.time() + timeout
    try:
        while len(out) < tasks:
            assert time.time() < deadline, f"quarantined {len(out)} of {tasks} tasks in {timeout}s"
            r = w.LeaseTask(sig_pb2.LeaseTaskRequest(worker_id="test-failing-worker",
                                                     wait=duration_pb2.Duration(seconds=2)), metadata=md, timeout=30)
            if not r.HasField("task"):
                continue
            assert r.task.component_key in keys, f"leased another pipeline's task {r.task.component_key}"
            f = w.FailTask(sig_pb2.FailTaskRequest(lease_id=r.lease_id, error="test: injected failure"),
                           metadata=md, timeout=30)
            if f.quarantined:
                out.append((r.task.component_key, r.task.block_id))
    finally:
        ch.close()
    return out


def test_wait_raises_on_failed_blocks_and_times_out(stack):
    c = stack.client()
    stack.stop_workers()
    try:
        resp = c.submit('input ids = hash(unigrams(lower(col("ad_title"))), buckets=555)', client="ctr",
                        pipeline="quarantined", start=START, end=END)
        key = resp.solution.inputs[0].component_key
        assert resp.solution.blocks_pending == 4
        # Pending with no worker: the wait times out, as a TimeoutError.
        t0 = time.monotonic()
        with pytest.raises(TimeoutError) as ei:
            c.wait("ctr", "quarantined", timeout=1.5)
        assert time.monotonic() - t0 < 10
        e = ei.value
        assert isinstance(e, sig_client.DeadlineExceededError) and isinstance(e, sig_client.SigError)
        assert e.code == "DEADLINE_EXCEEDED" and "0/4 blocks ready, 4 pending" in str(e), str(e)

        bad = fail_tasks(stack, {key}, tasks=4)
        assert sorted(b for _, b in bad) == sorted(b.block_id for b in resp.solution.inputs[0].blocks)
        seen = []
        with pytest.raises(sig_client.MemoFailedError) as ei:
            c.wait("ctr", "quarantined", timeout=60, progress=seen.append)
        e = ei.value
        assert e.input == "ids" and e.component == key and e.block == resp.solution.inputs[0].blocks[0].block_id, e
        assert [f.block for f in e.failures] == [b.block_id for b in resp.solution.inputs[0].blocks]
        assert all(f.input == "ids" and f.component == key and "injected failure" in f.reason for f in e.failures)
        assert "memo failed" in str(e) and "injected failure" in str(e) and not e.retryable
        assert seen and seen[-1].failed == 4 and seen[-1].pending == 0, [str(p) for p in seen]
        # A MEMO read of it names the same entry, as attributes too.
        with pytest.raises(sig_client.MemoFailedError) as ei:
            list(c.read("ctr", "quarantined"))
        assert ei.value.input == "ids" and ei.value.component == key and ei.value.block, ei.value.metadata
        # LOCAL reads it meanwhile.
        assert len(c.read("ctr", "quarantined", mode="local").read_all()) == EVENTS
    finally:
        stack.start_workers()
    # Released by an operator, the blocks are computed and wait returns.
    with stack.client("operator") as op:
        for k, b in bad:
            op._sigd_stub().ReleaseQuarantine(sig_pb2.ReleaseQuarantineRequest(component_key=k, block_id=b),
                                              metadata=op._md(), timeout=30)
    sol = c.wait("ctr", "quarantined", timeout=120)
    assert sol.complete and sol.blocks_ready == 4
    c.close()


def test_stream_read_again_after_wait(stack):
    """A MEMO read of a pending pipeline raises MemoPendingError; once wait
    returns, iterating the same stream again resolves the read anew and
    delivers every row, none twice."""
    c = stack.client()
    stack.stop_workers()
    try:
        c.submit('input ids = hash(unigrams(lower(col("query"))), buckets=333)', client="ctr",
                 pipeline="again", start=START, end=END)
        stream = c.read("ctr", "again", batch_rows=700)
        with pytest.raises(sig_client.MemoPendingError):
            for _ in stream:
                pass
        assert stream.state.rows == 0
        # The read was resolved (GetFlightInfo) and its first block's DoGet
        # refused: the endpoints in hand name pending memo objects.
        assert stream.info is not None and len(stream.info.endpoints) == 4
    finally:
        stack.start_workers()
    c.wait("ctr", "again", timeout=120)
    ids = np.concatenate([b.column("event_id").to_numpy() for b in stream])
    assert len(ids) == EVENTS == len(np.unique(ids)) == stream.state.rows
    # Done: the same stream again is empty; a new read is a new pass.
    assert list(stream) == []
    assert c.read("ctr", "again").read_all().num_rows == EVENTS
    c.close()


def test_read_all_and_len(stack, ctr_pipeline):
    c = stack.client()
    stream = c.read(*ctr_pipeline, batch_rows=1000)
    assert len(stream) == EVENTS
    first = next(iter(stream))
    rest = stream.read_all()
    assert first.num_rows == 1000 and rest.num_rows == EVENTS - 1000
    assert rest.schema.equals(stream.schema)
    whole = c.read(*ctr_pipeline, batch_rows=1000).to_table()
    assert whole.num_rows == EVENTS
    assert whole.slice(1000).equals(rest.combine_chunks()) or whole.slice(1000).to_pylist() == rest.to_pylist()
    c.close()


def test_numpy_masks_nulls():
    b = pa.record_batch({
        "n": pa.array([1, None, 3], pa.int64()),
        "f": pa.array([0.5, None, 2.0], pa.float64()),
        "full": pa.array([7, 8, 9], pa.int64()),
        "l": pa.array([[1, None], None, [4]], pa.list_(pa.int64())),
    })
    d = to_numpy(b)
    n = d["n"]
    assert isinstance(n, np.ma.MaskedArray) and list(np.ma.getmaskarray(n)) == [False, True, False]
    assert n.sum() == 4 and n.tolist() == [1, None, 3]
    assert isinstance(d["f"], np.ma.MaskedArray) and d["f"].tolist() == [0.5, None, 2.0]
    assert type(d["full"]) is np.ndarray and d["full"].tolist() == [7, 8, 9]
    assert d["l"]["values"].tolist() == [1, None, 4] and d["l"]["valid"].tolist() == [True, False, True]
    assert list(d["l"]["offsets"]) == [0, 2, 2, 3]
    with pytest.raises(ValueError, match="'n' holds 1 nulls \\(the first at row 1\\)"):
        dense("n", n)
    assert dense("full", d["full"]) is d["full"]
