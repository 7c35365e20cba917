"""Batches as numpy arrays, in the shape embedding lookups want.

Nulls are never turned into values silently: an int or float column that
holds a null is a numpy masked array (numpy.ma.MaskedArray, mask True where
the value is null; its data there is 0 for ints, NaN for floats), one
without nulls a plain ndarray. The framework adapters (jax_input,
torch_data, tf_data) want dense tensors and refuse a column holding nulls
(dense() raises ValueError naming it) rather than feed a made-up 0.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def list_column(col: pa.ListArray) -> dict:
    """A list column as {"values": the flattened values, "offsets": int32
    row offsets into them (len rows + 1, starting at 0), "valid": bool per
    row}: row i holds values[offsets[i]:offsets[i+1]]; a null row holds
    none (valid False). values follow scalar_column: masked where a value
    inside a list is null."""
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
    """A column of ints, floats or strings as a numpy array. Without nulls a
    plain ndarray (zero-copy where Arrow allows). An int or float column
    holding nulls is a numpy.ma.MaskedArray whose mask is True at the nulls
    (the data there is 0, or NaN for floats: use the mask, never the data);
    a string column is an object array with None at the nulls."""
    t = col.type
    if (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)) and col.null_count:
        fill = float("nan") if pa.types.is_floating(t) else (False if pa.types.is_boolean(t) else 0)
        data = col.fill_null(fill).to_numpy(zero_copy_only=False)
        return np.ma.MaskedArray(data, mask=~valid_mask(col))
    if pa.types.is_integer(t):
        return col.to_numpy()
    return col.to_numpy(zero_copy_only=False)


def dense(name: str, a: np.ndarray) -> np.ndarray:
    """a as a plain ndarray for a framework tensor: a masked array (a column
    holding nulls) is an error naming the column and its first null row."""
    if isinstance(a, np.ma.MaskedArray):
        rows = np.flatnonzero(np.ma.getmaskarray(a))
        if len(rows):
            raise ValueError(f"column {name!r} holds {len(rows)} nulls (the first at row {rows[0]}): a framework "
                             "tensor has no null; fill them in the graph, or read Stream.numpy(), which masks them")
        return np.ma.getdata(a)
    return a


def to_numpy(batch: pa.RecordBatch) -> dict:
    """A batch as a dict of numpy arrays by column name: scalar columns as
    arrays (scalar_column: masked arrays where they hold nulls), list columns
    as dicts of values, offsets and validity (list_column)."""
    out = {}
    for name, col in zip(batch.schema.names, batch.columns):
        if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
            out[name] = list_column(col)
        else:
            out[name] = scalar_column(col)
    return out
