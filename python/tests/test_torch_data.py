"""The PyTorch adapter (sig_client.torch_data) against the session's stack:
fork-start DataLoader workers after the parent used its client, 2 ranks x
2 workers reading every row exactly once, EmbeddingBag inputs, and a read
resumed from a saved state with another worker count."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # extra "torch"

from torch.utils.data import DataLoader  # noqa: E402

from sig_client.torch_data import POSITION, SigIterableDataset  # noqa: E402
from conftest import EVENTS  # noqa: E402


def loader(ds, workers):
    return DataLoader(ds, batch_size=None, num_workers=workers,
                      multiprocessing_context="fork" if workers else None)


def test_two_ranks_two_fork_workers_read_every_row_once(stack, ctr_pipeline):
    c = stack.client()
    # The parent has used both of its client's connections before the
    # workers fork: sigd's gRPC and the readers' Flight.
    c.wait(*ctr_pipeline, timeout=60)
    want = c.read(*ctr_pipeline, batch_rows=256).read_all()
    assert c._flights and c._channel is not None
    click = dict(zip(want.column("event_id").to_pylist(), want.column("click").to_pylist()))
    query = dict(zip(want.column("event_id").to_pylist(), want.column("query").to_pylist()))

    ids, endpoints = [], {}
    emb = torch.nn.EmbeddingBag(4096, 3, mode="sum")
    for rank in range(2):
        ds = SigIterableDataset(c, *ctr_pipeline, world_size=2, rank=rank, batch_rows=256)
        for b in ds.track(loader(ds, 2)):
            ev = b["event_id"].numpy()
            ids.append(ev)
            endpoints.setdefault(rank, set()).add(b[POSITION]["endpoint"])
            assert b["event_id"].dtype == torch.int64 and b["click"].tolist() == [click[e] for e in ev]
            q = b["query"]
            assert q["values"].dtype == torch.int64 and len(q["offsets"]) == len(ev)
            bags = emb(q["values"], q["offsets"])  # what EmbeddingBag takes as it comes
            assert bags.shape == (len(ev), 3)
            for i in (0, len(ev) // 2, len(ev) - 1):
                ref = emb.weight[torch.tensor(query[ev[i]] or [], dtype=torch.int64)].sum(0)
                assert torch.allclose(bags[i], ref, atol=1e-6), i
        # Every endpoint this rank read is done in its state.
        assert ds.state.done == endpoints[rank] and not ds.state.rows, ds.state_dict()
    got = np.concatenate(ids)
    assert len(got) == EVENTS and len(np.unique(got)) == EVENTS
    assert set(got.tolist()) == set(click)
    # 4 endpoints over 4 shards: each rank reads two, none the other's.
    assert endpoints == {0: {0, 1}, 1: {2, 3}}, endpoints
    c.close()


def test_resume_from_state_with_other_worker_count(stack, ctr_pipeline):
    c = stack.client()
    ds = SigIterableDataset(c, *ctr_pipeline, world_size=1, rank=0, batch_rows=300)
    first = []
    for i, b in enumerate(ds.track(loader(ds, 2))):
        first.append(b["event_id"].numpy())
        if i == 6:
            break
    saved = json.dumps(ds.state_dict())
    st = json.loads(saved)
    # Both workers were mid-block: the state holds rows within endpoints.
    assert st["rows"] and not st["done"], st
    ds2 = SigIterableDataset(c, *ctr_pipeline, world_size=1, rank=0, batch_rows=300)
    ds2.load_state_dict(st)
    rest = [b["event_id"].numpy() for b in ds2.track(loader(ds2, 1))]
    got = np.concatenate(first + rest)
    assert len(got) == EVENTS and len(np.unique(got)) == EVENTS
    assert ds2.state.done == {0, 1, 2, 3}
    # The next epoch reads everything again, in the main process too.
    ds2.set_epoch(1)
    assert sum(len(b["event_id"]) for b in ds2.track(loader(ds2, 0))) == EVENTS
    c.close()
