"""A small CTR model in JAX trained on a SIG pipeline's batches, end to end.

The pipeline's graph (GRAPH) asks SIG for five model inputs of the Ads
events: the hashed words the query shares with the ad's title and the
query's own words (list columns: embedding bags), the ad's category and the
device (hashed) and a bucket of the bid price. The script submits it, waits
for its read solution (printing progress), then trains for --epochs passes
over the pipeline's batches, read from SIG's readers through Arrow Flight
by sig_client's JAX input iterator, and prints each epoch's mean log loss
next to the log loss of always predicting the click rate.

Against a running SIG:
    python train_ctr.py --sigd HOST:PORT --readers HOST:PORT,HOST:PORT --token TRAINER_TOKEN
On a local stack it starts itself (sigd dev, ingested events, workers and
two readers, built from this repository with go build):
    python train_ctr.py --dev

--state FILE saves the read position after every step and, when FILE
exists, continues the read from it: a job restarted mid-epoch reads exactly
the batches it had not trained on (the model's parameters would be
checkpointed beside it in a real job; this example keeps them in memory).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

import sig_client
from sig_client.jax_input import JaxIterator

GRAPH = """\
let q = unigrams(lower(col("query")))
let t = unigrams(lower(col("ad_title")))
input overlap  = hash(intersect(q, t), buckets=4096)
input query    = hash(q, buckets=4096)
input category = hash(col("ad_category"), buckets=64)
input device   = hash(col("device"), buckets=16)
input price    = bucketize(col("bid_price"), boundaries=[0.1, 0.5, 1, 5])
"""
# Each input's vocabulary: its hash buckets (bucketize: boundaries + 1).
VOCAB = {"overlap": 4096, "query": 4096, "category": 64, "device": 16, "price": 5}
LISTS = ("overlap", "query")
DIM = 8


def init_params(key):
    import jax

    keys = jax.random.split(key, len(VOCAB) + 2)
    p = {name: 0.05 * jax.random.normal(k, (n, DIM)) for (name, n), k in zip(VOCAB.items(), keys)}
    p["hidden"] = 0.1 * jax.random.normal(keys[-2], (len(VOCAB) * DIM, 16))
    p["hidden_b"] = np.zeros(16, np.float32)
    p["out"] = 0.1 * jax.random.normal(keys[-1], (16,))
    p["bias"] = np.float32(0.0)
    return p


def logits(p, x, batch_rows):
    """The model: an embedding bag (sum) per list input, an embedding per
    scalar input, a hidden ReLU layer over their concatenation."""
    import jax
    import jax.numpy as jnp

    parts = []
    for name in VOCAB:
        if name in LISTS:
            v = x[name]
            # Padded values have segment batch_rows, which segment_sum drops.
            parts.append(jax.ops.segment_sum(p[name][v["values"]], v["segment_ids"], num_segments=batch_rows))
        else:
            parts.append(p[name][x[name]])
    h = jax.nn.relu(jnp.concatenate(parts, axis=1) @ p["hidden"] + p["hidden_b"])
    return h @ p["out"] + p["bias"]


def make_step(batch_rows: int, lr: float):
    """A jitted Adagrad step: (params, accumulators, batch) -> (params,
    accumulators, mean log loss over the batch's real rows)."""
    import jax
    import jax.numpy as jnp

    def loss_fn(p, x):
        z = logits(p, x, batch_rows)
        y = x["click"].astype(jnp.float32)
        w = x["weight"]
        ll = jnp.maximum(z, 0) - z * y + jnp.log1p(jnp.exp(-jnp.abs(z)))
        return jnp.sum(ll * w) / jnp.maximum(jnp.sum(w), 1)

    @jax.jit
    def step(p, acc, x):
        loss, g = jax.value_and_grad(loss_fn)(p, x)
        acc = jax.tree_util.tree_map(lambda a, gi: a + gi * gi, acc, g)
        p = jax.tree_util.tree_map(lambda pi, gi, a: pi - lr * gi / (jnp.sqrt(a) + 1e-7), p, g, acc)
        return p, acc, loss

    return step


def train(client: sig_client.Client, *, pipeline_client: str = "ctr", pipeline: str = "ctr-example",
          start: str, end: str, epochs: int = 5, batch_rows: int = 256, lr: float = 0.5,
          state_path: str | None = None, seed: int = 0, log=print) -> dict:
    """Submits GRAPH, waits, trains; returns {"epochs": [mean loss per
    epoch], "steps": [loss per step], "base": log loss of the click rate,
    "rows": rows trained on}."""
    import jax

    client.submit(GRAPH, client=pipeline_client, pipeline=pipeline, start=start, end=end)
    client.wait(pipeline_client, pipeline, progress=lambda pr: log(f"sig: {pr}"))

    params = init_params(jax.random.PRNGKey(seed))
    acc = jax.tree_util.tree_map(lambda a: np.full(np.shape(a), 0.1, np.float32), params)
    step = make_step(batch_rows, lr)
    out = {"epochs": [], "steps": [], "rows": 0}
    clicks = rows = 0
    for epoch in range(epochs):
        if state_path and os.path.exists(state_path):
            stream = client.read(state=sig_client.ReadState.load(state_path))
        else:
            stream = client.read(pipeline_client, pipeline, batch_rows=batch_rows)
        losses = []
        t0 = time.time()
        for x in JaxIterator(stream, batch_rows=batch_rows, values_bucket=512):
            params, acc, loss = step(params, acc, x)
            losses.append(float(loss))
            if epoch == 0:
                clicks += int(np.asarray(x["click"]).sum())
                rows += int(np.asarray(x["weight"]).sum())
            if state_path:
                stream.state.save(state_path)
        if state_path and os.path.exists(state_path):
            os.remove(state_path)  # the epoch is done: the next reads from the start
        out["steps"].extend(losses)
        out["epochs"].append(float(np.mean(losses)))
        out["rows"] += stream.state.rows
        log(f"epoch {epoch}: {len(losses)} steps, {stream.state.rows} rows, mean log loss {out['epochs'][-1]:.4f} "
            f"({stream.state.rows / (time.time() - t0):.0f} examples/s)")
    ctr = clicks / max(rows, 1)
    out["base"] = -(ctr * math.log(ctr) + (1 - ctr) * math.log(1 - ctr)) if 0 < ctr < 1 else 0.0
    log(f"click rate {ctr:.4f}: a constant prediction's log loss {out['base']:.4f}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dev", action="store_true", help="start a local SIG stack from this repository")
    ap.add_argument("--sigd", help="sigd's gRPC address")
    ap.add_argument("--readers", default="", help="reader addresses, comma-separated")
    ap.add_argument("--token", default=os.environ.get("SIG_TOKEN", ""), help="a trainer token of --client ($SIG_TOKEN)")
    ap.add_argument("--client", default="ctr")
    ap.add_argument("--pipeline", default="ctr-example")
    ap.add_argument("--start", default="2026-01-01T00:00:00Z", help="event range start (RFC 3339)")
    ap.add_argument("--end", default="2026-01-01T02:00:00Z", help="event range end (RFC 3339)")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch-rows", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--state", help="save the read position here after every step; resume from it")
    a = ap.parse_args(argv)
    stack = None
    if a.dev:
        from sig_client.devstack import DevStack

        repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        print("starting a local SIG stack (go build, sigd dev, events, workers, readers)...", file=sys.stderr)
        stack = DevStack.start(repo)
        client = stack.client("trainer-" + a.client)
    else:
        if not a.sigd or not a.readers:
            ap.error("--sigd and --readers are required (or --dev)")
        client = sig_client.Client(sigd=a.sigd, readers=a.readers.split(","), token=a.token)
    try:
        train(client, pipeline_client=a.client, pipeline=a.pipeline, start=a.start, end=a.end, epochs=a.epochs,
              batch_rows=a.batch_rows, lr=a.lr, state_path=a.state)
    except sig_client.SigError as e:
        print(f"train_ctr: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    finally:
        client.close()
        if stack is not None:
            stack.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
