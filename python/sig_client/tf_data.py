"""A tf.data.Dataset over a SIG pipeline (extra "tf").

    src = SigTFData(client, "ctr", "p", batch_rows=1024, parallel_reads=2)   # world_size, rank: the input pipelines
    for x in src.track(src.dataset()):          # records what the loop consumed
        logits = model(x)                       # x["query"]: tf.RaggedTensor of ids, one row per example
        ...
        save(src.state_dict())

Each element is one batch of the pipeline (the reader's batch_rows-row
batches, aligned to the block) as a dict: a scalar column a 1-d tensor
(tf.int64, tf.float64), a list column (hashed ids) a tf.RaggedTensor of
shape [rows, None] (ragged_rank 1, int64 row splits); a null row is an
empty row. String columns are left out; a column holding a null is an
error naming it (sig_client.arrays.dense). "sig_position" is where the read
stands after the batch (endpoint, block, row, done: scalar tensors), which
track() records; drop it before a Keras fit (without_position).

Endpoints (one per raw block) are split across input pipelines (world_size,
rank: tf.distribute's InputContext num_input_pipelines and
input_pipeline_id, or the job's own) and parallel_reads readers within one
(interleaved, each a Python generator reading its endpoints in turn), by
sig_client.shard: each endpoint is read exactly once per epoch. dataset()
is one epoch; set_epoch(n) before building the next (reshuffled when
shuffle=True). Resuming: state_dict()/load_state_dict() as in torch_data
(per endpoint, as consumed through track()).
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
import tensorflow as tf

from .arrays import dense, to_numpy
from .client import Client
from .shard import POSITION, EpochState, EpochTracking, ShardReader

_DTYPES = {pa.int64(): tf.int64, pa.int32(): tf.int32, pa.float64(): tf.float64, pa.float32(): tf.float32,
           pa.bool_(): tf.bool, pa.int16(): tf.int16, pa.int8(): tf.int8}


def signature(schema: pa.Schema) -> dict:
    """The element spec of a pipeline's batches (see the module doc)."""
    out = {}
    for f in schema:
        t = f.type
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            if t.value_type in _DTYPES:
                out[f.name] = tf.RaggedTensorSpec(shape=[None, None], dtype=_DTYPES[t.value_type], ragged_rank=1,
                                                  row_splits_dtype=tf.int64)
        elif t in _DTYPES:
            out[f.name] = tf.TensorSpec(shape=[None], dtype=_DTYPES[t])
    out[POSITION] = {"endpoint": tf.TensorSpec([], tf.int64), "block": tf.TensorSpec([], tf.string),
                     "row": tf.TensorSpec([], tf.int64), "done": tf.TensorSpec([], tf.bool)}
    return out


def to_tf(batch: pa.RecordBatch, spec: dict) -> dict:
    """A batch as the structure of spec (signature)."""
    out = {}
    for name, c in to_numpy(batch).items():
        if name not in spec:
            continue
        if isinstance(c, dict):
            values = dense(name + ".values", c["values"])
            out[name] = tf.RaggedTensor.from_row_splits(values, c["offsets"].astype(np.int64), validate=False)
        else:
            out[name] = dense(name, c)
    return out


def without_position(x: dict) -> dict:
    """An element without sig_position (for Keras, which takes features)."""
    return {k: v for k, v in x.items() if k != POSITION}


class SigTFData(EpochTracking):
    """A pipeline's batches as tf.data (see the module doc). client is a
    sig_client.Client with reader addresses and a token; the read is
    client_name/pipeline with Client.command's options."""

    def __init__(self, client: Client, client_name: str, pipeline: str, *, world_size: int = 1, rank: int = 0,
                 parallel_reads: int = 1, shuffle: bool = False, seed: int = 0, start=None, end=None,
                 batch_rows: int = 0, labels: Sequence[str] = (), mode: str = "memo"):
        if world_size < 1 or not 0 <= rank < world_size or parallel_reads < 1:
            raise ValueError(f"rank {rank} of world_size {world_size}, parallel_reads {parallel_reads}")
        self.client = client
        self.world_size = world_size
        self.rank = rank
        self.parallel_reads = parallel_reads
        self.shuffle = shuffle
        self.seed = seed
        self.command = client.command(client_name, pipeline, start=start, end=end, batch_rows=batch_rows,
                                      labels=labels, mode=mode)
        self.state = EpochState()
        self._spec = None

    @classmethod
    def for_input_context(cls, ctx: "tf.distribute.InputContext", client: Client, client_name: str, pipeline: str,
                          **kw) -> "SigTFData":
        """The reader of one input pipeline of a tf.distribute strategy."""
        return cls(client, client_name, pipeline, world_size=ctx.num_input_pipelines, rank=ctx.input_pipeline_id, **kw)

    @property
    def element_spec(self) -> dict:
        if self._spec is None:
            self._spec = signature(self.client.read(state=_state(self.command)).schema)
        return self._spec

    def _generator(self, k) -> Iterator[dict]:
        shards = self.world_size * self.parallel_reads
        shard = self.rank * self.parallel_reads + int(k)
        spec = self.element_spec
        # The state as the epoch's dataset was built: track() moves on
        # while generators read ahead.
        state = EpochState.from_dict(self._start)
        for batch, pos in ShardReader(self.client, self.command, shards=shards, shard=shard, state=state,
                                      shuffle=self.shuffle, seed=self.seed):
            out = to_tf(batch, spec)
            out[POSITION] = pos.to_dict()
            yield out

    def dataset(self) -> tf.data.Dataset:
        """One epoch (the state's, from where it stands) as a tf.data.Dataset."""
        spec = self.element_spec
        self._start = self.state.to_dict()
        one = lambda k: tf.data.Dataset.from_generator(self._generator, args=(k,), output_signature=spec)  # noqa: E731
        if self.parallel_reads == 1:
            return one(np.int64(0))
        return tf.data.Dataset.range(self.parallel_reads).interleave(
            one, cycle_length=self.parallel_reads, num_parallel_calls=self.parallel_reads, deterministic=False)


def _state(command: bytes):
    from .state import ReadState

    return ReadState(command=command)
