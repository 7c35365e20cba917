"""The tf.data adapter (sig_client.tf_data) against the session's stack:
2 input pipelines x 2 parallel reads reading every row exactly once, list
inputs as tf.RaggedTensor, a resumed read, and a small TF model trained on
it whose log loss falls below a constant predictor's."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")  # extra "tf"

from sig_client.tf_data import POSITION, SigTFData, without_position  # noqa: E402
from conftest import EVENTS  # noqa: E402


def test_two_pipelines_two_parallel_reads_every_row_once(stack, ctr_pipeline):
    c = stack.client()
    want = c.read(*ctr_pipeline, batch_rows=256).read_all()
    query = dict(zip(want.column("event_id").to_pylist(), want.column("query").to_pylist()))
    ids, endpoints = [], {}
    for rank in range(2):
        src = SigTFData(c, *ctr_pipeline, world_size=2, rank=rank, parallel_reads=2, batch_rows=256)
        for x in src.track(src.dataset()):
            ev = x["event_id"].numpy()
            ids.append(ev)
            endpoints.setdefault(rank, set()).add(int(x[POSITION]["endpoint"]))
            q = x["query"]
            assert isinstance(q, tf.RaggedTensor) and q.dtype == tf.int64 and q.nrows() == len(ev)
            rows = q.to_list()
            assert all(rows[i] == (query[e] or []) for i, e in enumerate(ev))
        assert src.state.done == endpoints[rank], src.state_dict()
    got = np.concatenate(ids)
    assert len(got) == EVENTS and len(np.unique(got)) == EVENTS
    assert endpoints == {0: {0, 1}, 1: {2, 3}}, endpoints
    c.close()


def test_resume(stack, ctr_pipeline):
    c = stack.client()
    src = SigTFData(c, *ctr_pipeline, parallel_reads=2, batch_rows=300)
    first = []
    for i, x in enumerate(src.track(src.dataset())):
        first.append(x["event_id"].numpy())
        if i == 4:
            break
    st = json.loads(json.dumps(src.state_dict()))
    assert st["rows"], st
    src2 = SigTFData(c, *ctr_pipeline, parallel_reads=1, batch_rows=300)
    src2.load_state_dict(st)
    rest = [x["event_id"].numpy() for x in src2.track(src2.dataset())]
    got = np.concatenate(first + rest)
    assert len(got) == EVENTS and len(np.unique(got)) == EVENTS
    c.close()


def test_model_loss_below_constant(stack, ctr_pipeline):
    """A logistic regression over the pipeline's hashed inputs (a sum of
    per-id weights: an embedding bag of width 1 for the ragged ones), trained
    with plain TF on the tf.data batches, ends with a mean log loss below
    the constant prediction's (the click rate)."""
    tf.random.set_seed(0)
    c = stack.client()
    src = SigTFData(c, *ctr_pipeline, parallel_reads=2, batch_rows=250)
    features = ["overlap", "query", "category", "device", "price"]
    tables = {f: tf.Variable(tf.zeros([4096], tf.float32), name=f) for f in features}
    bias = tf.Variable(0.0)
    opt = tf.keras.optimizers.Adam(0.05)

    def logits(x):
        out = bias
        for f in features:
            v = x[f]
            if isinstance(v, tf.RaggedTensor):
                out = out + tf.reduce_sum(tf.gather(tables[f], v), axis=1)
            else:
                out = out + tf.gather(tables[f], v)
        return out

    @tf.function(reduce_retracing=True)
    def step(x):
        y = tf.cast(x["click"], tf.float32)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits(x)))
        vars_ = list(tables.values()) + [bias]
        opt.apply_gradients(zip(tape.gradient(loss, vars_), vars_))
        return loss * tf.cast(tf.shape(y)[0], tf.float32)

    epochs = []
    for epoch in range(4):
        src.set_epoch(epoch)
        total, rows = 0.0, 0
        for x in src.dataset().map(without_position):
            total += float(step(x))
            rows += int(tf.shape(x["click"])[0])
        assert rows == EVENTS
        epochs.append(total / rows)
    clicks = c.read(*ctr_pipeline).read_all().column("click").to_numpy()
    p = clicks.mean()
    base = -(p * math.log(p) + (1 - p) * math.log(1 - p))
    assert epochs[-1] < epochs[0] and epochs[-1] < base - 0.01, (epochs, base)
    c.close()
