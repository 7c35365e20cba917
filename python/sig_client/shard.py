"""Splitting a pipeline's read across the readers of one epoch, and where
each stands: what the PyTorch and tf.data adapters (torch_data, tf_data)
share.

A read solution has one Flight endpoint per raw block (in event order).
An epoch's endpoints are dealt round-robin to shards = world_size x
workers per rank (DataLoader workers, or tf.data's parallel reads): shard
rank * workers + worker reads endpoints shard, shard + shards, ... (after a
permutation by seed and epoch when shuffled, the same in every process), so
each endpoint is read by exactly one shard, once per epoch. A shard reads
its endpoints one after another, each from its first row not yet consumed.

EpochState is where an epoch stands: the endpoints consumed to their end,
and the next row of those begun. The adapters attach each batch's Position
(endpoint, block, row after it, whether it ended the endpoint) and the
training loop's side records it once the batch is consumed (track), so a
saved state counts only what the model saw, not what workers prefetched.
It is per endpoint, not per shard: a state saved with one sharding resumes
with another (other worker counts), and the states of several ranks merge
(EpochState.merge) into the epoch's.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa

from . import errors
from .client import Client, Stream
from .state import ReadState


def assign(endpoints: int, shards: int, shard: int, *, shuffle: bool = False, seed: int = 0,
           epoch: int = 0) -> list[int]:
    """The endpoint indices shard (of shards) reads in an epoch, in order."""
    if shards < 1 or not 0 <= shard < shards:
        raise ValueError(f"shard {shard} of {shards}")
    order = np.arange(endpoints)
    if shuffle:
        order = np.random.default_rng([seed, epoch]).permutation(endpoints)
    return [int(i) for i in order[shard::shards]]


@dataclasses.dataclass(frozen=True)
class Position:
    """Where the read stands after one batch: its endpoint (index in the
    read solution's), block, the next row of it, and whether the batch
    ended it."""

    endpoint: int
    block: str
    row: int
    done: bool

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class EpochState:
    """An epoch's progress (see the module doc): done, the endpoints
    consumed to their end; rows, the next row of each endpoint begun;
    blocks, each begun or done endpoint's block id (checked on resume)."""

    epoch: int = 0
    done: set = dataclasses.field(default_factory=set)
    rows: dict = dataclasses.field(default_factory=dict)
    blocks: dict = dataclasses.field(default_factory=dict)

    def advance(self, p: Position | dict) -> None:
        """Records a consumed batch's position."""
        if isinstance(p, dict):
            p = Position(**{k: _py(v) for k, v in p.items()})
        self.blocks[p.endpoint] = p.block
        if p.done:
            self.done.add(p.endpoint)
            self.rows.pop(p.endpoint, None)
        else:
            self.rows[p.endpoint] = max(p.row, self.rows.get(p.endpoint, 0))

    def to_dict(self) -> dict:
        """JSON-able (keys are strings)."""
        return {"epoch": self.epoch, "done": sorted(self.done),
                "rows": {str(k): v for k, v in sorted(self.rows.items())},
                "blocks": {str(k): v for k, v in sorted(self.blocks.items())}}

    @classmethod
    def from_dict(cls, d: dict) -> "EpochState":
        return cls(epoch=int(d.get("epoch", 0)), done={int(i) for i in d.get("done", ())},
                   rows={int(k): int(v) for k, v in d.get("rows", {}).items()},
                   blocks={int(k): str(v) for k, v in d.get("blocks", {}).items()})

    @classmethod
    def merge(cls, states) -> "EpochState":
        """The epoch's state from the states of its ranks (each saw its own
        endpoints)."""
        out = cls()
        epochs = set()
        for s in states:
            s = s if isinstance(s, EpochState) else cls.from_dict(s)
            epochs.add(s.epoch)
            out.done |= s.done
            out.blocks.update(s.blocks)
            for k, v in s.rows.items():
                out.rows[k] = max(v, out.rows.get(k, 0))
        if len(epochs) > 1:
            raise errors.StateMismatchError(f"states of different epochs {sorted(epochs)}")
        out.epoch = epochs.pop() if epochs else 0
        for k in out.done:
            out.rows.pop(k, None)
        return out


def _py(v):
    """A position field as delivered (a 0-d tensor or array, bytes) as Python."""
    if hasattr(v, "numpy"):  # a tf or torch tensor
        v = v.numpy()
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, bytes):
        v = v.decode()
    return v


POSITION = "sig_position"
"""The key of a batch's Position in what the adapters yield."""


class EpochTracking:
    """What both adapters keep of an epoch: its state, restarted by
    set_epoch, saved and restored (state_dict, load_state_dict) and
    advanced by track as the training loop consumes batches."""

    state: EpochState

    def set_epoch(self, epoch: int) -> None:
        """Starts epoch epoch (its progress empty) unless the state is of it."""
        if epoch != self.state.epoch:
            self.state = EpochState(epoch=epoch)

    def state_dict(self) -> dict:
        return self.state.to_dict()

    def load_state_dict(self, d: dict) -> None:
        self.state = EpochState.from_dict(d)

    def track(self, batches: Iterable[dict]) -> Iterator[dict]:
        """Yields batches (a DataLoader's, or a dataset's elements taken
        eagerly), recording each one's position in state as it is handed
        to the loop."""
        for b in batches:
            self.state.advance(b[POSITION])
            yield b


class ShardReader:
    """Reads one shard's endpoints of an epoch (see the module doc) from a
    state, yielding (batch, Position). The client is the caller's; in a
    forked worker it opens its own connections (Client's fork safety)."""

    def __init__(self, client: Client, command: bytes, *, shards: int, shard: int, state: EpochState,
                 shuffle: bool = False, seed: int = 0):
        self.client = client
        self.command = command
        self.shards = shards
        self.shard = shard
        self.state = state
        self.shuffle = shuffle
        self.seed = seed

    def endpoints(self, eps: int) -> list[int]:
        mine = assign(eps, self.shards, self.shard, shuffle=self.shuffle, seed=self.seed, epoch=self.state.epoch)
        return [i for i in mine if i not in self.state.done]

    def __iter__(self) -> Iterator[tuple[pa.RecordBatch, Position]]:
        plan = Stream(self.client, ReadState(command=self.command))
        eps = plan._plan()
        for i in self.endpoints(len(eps)):
            st = ReadState(command=self.command, block_index=i, block_id=self.state.blocks.get(i, ""),
                           row=self.state.rows.get(i, 0))
            s = Stream(self.client, st)
            s.info, s._iterated = plan.info, True
            held = None
            for b in s._endpoint(eps[i]):
                if held is not None:
                    yield held, Position(i, s.state.block_id, held_row, False)
                held, held_row = b, s.state.row
            if held is not None:
                yield held, Position(i, s.state.block_id, held_row, True)
