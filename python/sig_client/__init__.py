"""SIG's Python client: submit a feature graph to sigd, wait for its read
solution, and read the pipeline's training batches from SIG's readers
through Arrow Flight, as pyarrow.RecordBatch, numpy dicts, a JAX input
iterator, a PyTorch IterableDataset (sig_client.torch_data) or a tf.data
Dataset (sig_client.tf_data), resumable from a serializable ReadState. See
python/README.md."""

from .client import Client, Progress, Stream, event_range, failed_blocks, print_progress
from .errors import (AuthError, DataLossError, DeadlineExceededError, FailedBlock, InvalidArgumentError,
                     MemoFailedError, MemoPendingError, NotFoundError, ResourceExhaustedError, SigError,
                     StateMismatchError, UnavailableError)
from .state import ReadState

__all__ = [
    "Client", "Progress", "Stream", "ReadState", "event_range", "failed_blocks", "print_progress",
    "SigError", "MemoPendingError", "MemoFailedError", "FailedBlock", "DataLossError", "AuthError",
    "InvalidArgumentError", "NotFoundError", "UnavailableError", "ResourceExhaustedError", "StateMismatchError",
    "DeadlineExceededError",
]
