"""ReadState: where a pipeline's read is, serializable, so that a reader
killed mid-stream, or the training process itself, resumes with no row lost
or read twice."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import tempfile


@dataclasses.dataclass
class ReadState:
    """The position of a read of a pipeline's read solution.

    command is the marshaled sig.reader.v1.FlightCommand the read resolves
    (client, pipeline, range, labels, batch rows, mode); block_index the
    endpoint (one per raw block, in event order) being read and block_id its
    block; row the first row of that block not yet delivered. Batches are
    aligned to the block, so a read resumed from (block, row) on any reader
    delivers the very batches an unbroken one would have. rows counts the
    rows delivered so far, across blocks.
    """

    command: bytes
    block_index: int = 0
    block_id: str = ""
    row: int = 0
    rows: int = 0

    def to_json(self) -> str:
        d = dataclasses.asdict(self)
        d["command"] = base64.b64encode(self.command).decode()
        return json.dumps(d, sort_keys=True)

    @classmethod
    def from_json(cls, s: str) -> "ReadState":
        d = json.loads(s)
        d["command"] = base64.b64decode(d["command"])
        return cls(**d)

    def save(self, path: str) -> None:
        """Writes the state to path atomically (a crash leaves the old one)."""
        d = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".readstate-")
        with os.fdopen(fd, "w") as f:
            f.write(self.to_json())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str) -> "ReadState":
        with open(path) as f:
            return cls.from_json(f.read())

    def copy(self) -> "ReadState":
        return dataclasses.replace(self)
