"""A JAX input iterator over a SIG pipeline's batches.

Each batch becomes a dict of jax.numpy arrays on the default device. List
columns (e.g. hashed token ids) keep the values + offsets shape embedding
lookups want, and also give each value its row (segment_ids), so that an
embedding bag is jax.ops.segment_sum(table[values], segment_ids,
num_segments=rows). To keep shapes static (a jitted step compiles once),
batches are padded to batch_rows rows and list values to a multiple of
values_bucket: padded rows have weight 0, padded values point at row
batch_rows (one past the last), which segment_sum with num_segments=
batch_rows drops.

JAX keeps integers as int32 unless jax_enable_x64 is set: int64 columns are
then narrowed, and a value beyond int32 (a hash with more than 2^31
buckets) is an error naming the column rather than a silently wrapped id.
event_id stays a numpy int64 array on the host, exact, for bookkeeping.
"""

from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa

from .arrays import dense, to_numpy


def _pad(a: np.ndarray, n: int, fill=0) -> np.ndarray:
    if len(a) >= n:
        return a[:n]
    out = np.full(n, fill, dtype=a.dtype)
    out[: len(a)] = a
    return out


def pad_batch(batch: pa.RecordBatch, batch_rows: int, values_bucket: int = 1024) -> dict:
    """A batch as numpy arrays padded to static shapes (see the module doc):
    {"weight": 1 for real rows, 0 for padding, column: array, list column:
    {"values", "offsets", "segment_ids"}}. String columns are left out (a
    model takes hashed ids); a column holding nulls is a ValueError naming
    it (arrays.dense), never padded with made-up zeros."""
    n = batch.num_rows
    if n > batch_rows:
        raise ValueError(f"batch of {n} rows, more than batch_rows={batch_rows}")
    cols = to_numpy(batch)
    out = {"weight": _pad(np.ones(n, dtype=np.float32), batch_rows)}
    for name, c in cols.items():
        if isinstance(c, dict):
            values = c["values"]
            if values.dtype == object:
                continue
            values = dense(name + ".values", values)
            offsets = c["offsets"]
            cap = max(values_bucket, -(-len(values) // values_bucket) * values_bucket)
            seg = np.repeat(np.arange(n, dtype=np.int32), np.diff(offsets))
            out[name] = {
                "values": _pad(values, cap),
                "offsets": _pad(offsets, batch_rows + 1, fill=offsets[-1]),
                "segment_ids": _pad(seg, cap, fill=batch_rows),
            }
        elif c.dtype != object:
            out[name] = _pad(dense(name, c), batch_rows)
    return out


class JaxIterator:
    """Iterates batches (e.g. a sig_client Stream) as dicts of jax arrays
    padded to static shapes (pad_batch). state is the stream's ReadState
    when the source is a Stream: save it with the model's checkpoint."""

    def __init__(self, batches: Iterable[pa.RecordBatch], batch_rows: int, values_bucket: int = 1024):
        self.source = batches
        self.batch_rows = batch_rows
        self.values_bucket = values_bucket

    @property
    def state(self):
        return getattr(self.source, "state", None)

    def __iter__(self) -> Iterator[dict]:
        for b in self.source:
            x = pad_batch(b, self.batch_rows, self.values_bucket)
            ids = x.pop("event_id", None)
            out = {name: _to_device(name, v) for name, v in x.items()}
            if ids is not None:
                out["event_id"] = ids
            yield out


def _to_device(name: str, v):
    """A column (or a list column's dict) as jax arrays (see the module doc)."""
    import jax
    import jax.numpy as jnp

    if isinstance(v, dict):
        return {k: _to_device(f"{name}.{k}", a) for k, a in v.items()}
    if v.dtype == np.int64 and not jax.config.jax_enable_x64:
        if v.size and (v.min() < np.iinfo(np.int32).min or v.max() > np.iinfo(np.int32).max):
            raise ValueError(f"column {name!r} has int64 values beyond int32, which JAX keeps without "
                             "jax_enable_x64: enable it, or hash into fewer buckets")
        v = v.astype(np.int32)
    return jnp.asarray(v)
