"""Fork safety: a Client used by the parent (gRPC to sigd, Flight to the
readers) is used again in fork-start children; each opens its own
connections (over grpcio for the readers too: pyarrow.flight's gRPC core
cannot be used in a child forked from a process that used it), reads the
very batches the parent does, and the parent's connections keep working
after the children exit."""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle

import pyarrow as pa

from conftest import EVENTS


def _child(c, pipeline, out, q):
    try:
        inherited = c._pid  # the parent's: its connections are not this process's
        sol = c.solution(*pipeline, timeout=30)
        table = c.read(*pipeline, batch_rows=1000).read_all()
        with pa.OSFile(out, "wb") as f, pa.ipc.new_stream(f, table.schema) as w:
            w.write_table(table)
        kinds = sorted({type(f).__module__ + "." + type(f).__name__ for f in c._flights.values()})
        q.put((sol.complete, inherited != os.getpid() and c._pid == os.getpid(), kinds))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        q.put(repr(e))


def test_client_after_fork(stack, ctr_pipeline, tmp_path):
    c = stack.client()
    assert c.wait(*ctr_pipeline, timeout=60).complete  # gRPC used
    want = c.read(*ctr_pipeline, batch_rows=1000).read_all()  # Flight used
    assert c._flights and c._channel is not None  # both open when the children fork
    ctx = mp.get_context("fork")
    for round_ in range(3):
        q = ctx.Queue()
        outs = [str(tmp_path / f"child-{round_}-{i}.arrows") for i in range(2)]
        procs = [ctx.Process(target=_child, args=(c, ctr_pipeline, o, q)) for o in outs]
        for p in procs:
            p.start()
        got = [q.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(60)
            assert p.exitcode == 0
        for g in got:
            assert isinstance(g, tuple), g
            complete, fresh, kinds = g
            assert complete and fresh and kinds == ["sig_client._grpc_flight.Connection"], g
        for o in outs:
            t = pa.ipc.open_stream(o).read_all()
            assert t.num_rows == EVENTS and t.equals(want)
        # The parent's own connections still work, between forks too.
        assert c.read(*ctr_pipeline, batch_rows=1000).read_all().equals(want)
        assert c.solution(*ctr_pipeline).complete
    # Pickled (what a spawn-start worker gets): the configuration, no
    # connection; it opens its own.
    c2 = pickle.loads(pickle.dumps(c))
    assert not c2._flights and c2._channel is None and c2.readers == c.readers
    assert c2.read(*ctr_pipeline, batch_rows=1000).read_all().equals(want) and c2.solution(*ctr_pipeline).complete
    c2.close()
    c.close()
