"""SIG's Python client: submit a feature graph to sigd, wait for its read
solution, and read the pipeline's training batches from SIG's readers
through Arrow Flight, as pyarrow.RecordBatch, numpy dicts or a JAX input
iterator, resumable from a serializable ReadState. See python/README.md."""

from .client import Client, Progress, Stream, event_range, print_progress
from .errors import (AuthError, DataLossError, InvalidArgumentError, MemoFailedError, MemoPendingError,
                     NotFoundError, ResourceExhaustedError, SigError, StateMismatchError, UnavailableError)
from .state import ReadState

__all__ = [
    "Client", "Progress", "Stream", "ReadState", "event_range", "print_progress",
    "SigError", "MemoPendingError", "MemoFailedError", "DataLossError", "AuthError", "InvalidArgumentError",
    "NotFoundError", "UnavailableError", "ResourceExhaustedError", "StateMismatchError",
]
