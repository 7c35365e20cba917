"""Fork safety: a Client used by the parent (gRPC to sigd, Flight to the
readers) is used again in fork-start children; each opens its own
connections, and the parent's keep working after the children exit."""

from __future__ import annotations

import multiprocessing as mp
import os

import numpy as np

from conftest import EVENTS


def _child(c, pipeline, q):
    try:
        inherited = c._pid  # the parent's: its connections are not this process's
        sol = c.solution(*pipeline, timeout=30)
        rows = sum(b.num_rows for b in c.read(*pipeline, batch_rows=1000))
        q.put((sol.complete, rows, inherited != os.getpid() and c._pid == os.getpid()))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        q.put(repr(e))


def test_client_after_fork(stack, ctr_pipeline):
    c = stack.client()
    assert c.wait(*ctr_pipeline, timeout=60).complete  # gRPC used
    want = c.read(*ctr_pipeline, batch_rows=1000).read_all()  # Flight used
    assert c._flights and c._channel is not None  # both open when the children fork
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(c, ctr_pipeline, q)) for _ in range(2)]
    for p in procs:
        p.start()
    got = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    for g in got:
        assert isinstance(g, tuple), g
        complete, rows, fresh = g
        assert complete and rows == EVENTS and fresh, g
    # The parent's own connections still work.
    again = c.read(*ctr_pipeline, batch_rows=1000).read_all()
    assert again.equals(want)
    assert c.solution(*ctr_pipeline).complete
    assert len(np.unique(again.column("event_id").to_numpy())) == EVENTS
    c.close()
