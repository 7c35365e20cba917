"""Batches as numpy arrays, in the shape embedding lookups want."""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def list_column(col: pa.ListArray) -> dict:
    """A list column as {"values": the flattened values, "offsets": int32
    row offsets into them (len rows + 1, starting at 0), "valid": bool per
    row}: row i holds values[offsets[i]:offsets[i+1]]; a null row holds
    none."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    offsets = col.offsets.to_numpy(zero_copy_only=False).astype(np.int32, copy=False)
    lo, hi = int(offsets[0]), int(offsets[-1])
    values = col.values.slice(lo, hi - lo)
    return {"values": scalar_column(values), "offsets": offsets - lo, "valid": valid_mask(col)}


def valid_mask(col: pa.Array) -> np.ndarray:
    if col.null_count == 0:
        return np.ones(len(col), dtype=bool)
    return col.is_valid().to_numpy(zero_copy_only=False)


def scalar_column(col: pa.Array) -> np.ndarray:
    """A column of int64, float64 or strings as a numpy array: nulls are 0
    in int64 columns, NaN in float64 ones, None in strings (object arrays)."""
    t = col.type
    if pa.types.is_integer(t):
        return col.fill_null(0).to_numpy(zero_copy_only=False) if col.null_count else col.to_numpy()
    if pa.types.is_floating(t):
        return col.to_numpy(zero_copy_only=False)
    return col.to_numpy(zero_copy_only=False)


def to_numpy(batch: pa.RecordBatch) -> dict:
    """A batch as a dict of numpy arrays by column name: scalar columns as
    arrays (scalar_column), list columns as dicts of values, offsets and
    validity (list_column)."""
    out = {}
    for name, col in zip(batch.schema.names, batch.columns):
        if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
            out[name] = list_column(col)
        else:
            out[name] = scalar_column(col)
    return out
