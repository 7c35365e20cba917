"""A PyTorch IterableDataset over a SIG pipeline (extra "torch").

    ds = SigIterableDataset(client, "ctr", "p", batch_rows=1024)   # rank, world_size: torch.distributed's
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    for batch in ds.track(loader):              # records what the loop consumed
        bag = emb(batch["query"]["values"], batch["query"]["offsets"])   # nn.EmbeddingBag
        ...
        torch.save({"model": ..., "data": ds.state_dict()}, path)

Each item is one batch of the pipeline (batch_size=None: the reader cuts
batch_rows-row batches, aligned to the block) as a dict of tensors: a
scalar column a 1-d tensor (int64, float64), a list column (hashed ids)
{"values": int64 ids, "offsets": int64, one per row, where its ids begin},
what nn.EmbeddingBag(input, offsets) takes (include_last_offset=False); a
null row is an empty bag. String columns are left out; a column holding a
null is a ValueError naming it (sig_client.arrays.dense). "sig_position" is
where the read stands after the batch (shard.Position as a dict), which
track() records.

Endpoints (one per raw block) are split across distributed ranks and
DataLoader workers (sig_client.shard): each is read by one worker of one
rank, exactly once per epoch; set_epoch(n) starts epoch n (reshuffled when
shuffle=True). Workers are forked or spawned with the dataset: the client
opens its own connections in each (Client's fork safety; a spawned worker
gets the client pickled without them).

Resuming: state_dict() is the epoch's progress as consumed through
track(): endpoints done and the next row of those begun, per endpoint, so
it resumes with other worker counts too; with several ranks, merge their
states (shard.EpochState.merge) or give each rank its own.
load_state_dict(d) before iterating continues from it: no row the model
saw is read again, none is skipped.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
import torch
import torch.utils.data

from .arrays import dense, to_numpy
from .client import Client
from .shard import POSITION, EpochState, EpochTracking, ShardReader


def _tensor(a: np.ndarray) -> torch.Tensor:
    # Arrow's zero-copy arrays are read-only; torch wants to own writable memory.
    return torch.from_numpy(a if a.flags.writeable else a.copy())


def to_torch(batch: pa.RecordBatch) -> dict:
    """A batch as a dict of tensors (see the module doc)."""
    out = {}
    for name, c in to_numpy(batch).items():
        if isinstance(c, dict):
            if c["values"].dtype == object:
                continue
            values = dense(name + ".values", c["values"])
            out[name] = {"values": _tensor(values.astype(np.int64, copy=False) if values.dtype.kind in "iu" else values),
                         "offsets": torch.from_numpy(c["offsets"][:-1].astype(np.int64))}
        elif c.dtype != object:
            out[name] = _tensor(dense(name, c))
    return out


def _distributed() -> tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_world_size(), torch.distributed.get_rank()
    return 1, 0


class SigIterableDataset(EpochTracking, torch.utils.data.IterableDataset):
    """A pipeline's batches for a DataLoader (see the module doc). client
    is a sig_client.Client with reader addresses and a token; the read is
    client_name/pipeline with Client.command's options (start, end,
    batch_rows, labels, mode). world_size and rank default to
    torch.distributed's (1 and 0 when it is not initialized)."""

    def __init__(self, client: Client, client_name: str, pipeline: str, *, world_size: int | None = None,
                 rank: int | None = None, shuffle: bool = False, seed: int = 0, start=None, end=None,
                 batch_rows: int = 0, labels: Sequence[str] = (), mode: str = "memo"):
        super().__init__()
        if (world_size is None) != (rank is None):
            raise ValueError("give both world_size and rank, or neither (torch.distributed's)")
        if world_size is None:
            world_size, rank = _distributed()
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} of world_size {world_size}")
        self.client = client
        self.world_size = world_size
        self.rank = rank
        self.shuffle = shuffle
        self.seed = seed
        self.command = client.command(client_name, pipeline, start=start, end=end, batch_rows=batch_rows,
                                      labels=labels, mode=mode)
        self.state = EpochState()

    def shard(self) -> tuple[int, int]:
        """(shards, this worker's shard) in the calling process."""
        info = torch.utils.data.get_worker_info()
        workers, worker = (info.num_workers, info.id) if info is not None else (1, 0)
        return self.world_size * workers, self.rank * workers + worker

    def __iter__(self) -> Iterator[dict]:
        shards, shard = self.shard()
        reader = ShardReader(self.client, self.command, shards=shards, shard=shard, state=self.state,
                             shuffle=self.shuffle, seed=self.seed)
        for batch, pos in reader:
            out = to_torch(batch)
            out[POSITION] = pos.to_dict()
            yield out
