"""Fixtures of the Python client's tests: a real SIG stack (sigd dev with
MinIO and Kafka, ingested Ads events, remote workers and two readers, each a
process of the repository's binaries built with go build) shared by the
session, and the Go client's bytes for the same units (sigctl read).

$SIG_PY_BIN names a directory holding prebuilt sigd, sigctl and reader
binaries (skips the build); $SIG_MINIO_BIN the MinIO binary (default: the
repository's bin/minio, which `make deps` installs).
"""

from __future__ import annotations

import glob
import os
import subprocess

import pyarrow as pa
import pytest

from sig_client.devstack import DevStack, build_binaries

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The stack's data: EVENTS Ads events, one per second of event time from
# devstack.EPOCH, sealed into raw blocks of at most ROWS_PER_BLOCK rows per
# hourly window (4 blocks: 2000 + 1600 rows in the first hour, 2000 + 400 in
# the second).
EVENTS = 6000
ROWS_PER_BLOCK = 2000
START, END = "2026-01-01T00:00:00Z", "2026-01-01T02:00:00Z"

# A small CTR graph: the words the query shares with the ad's title (what
# the generator's click probability depends on), the query's words, the
# category, the device and a price bucket.
CTR_GRAPH = """\
let q = unigrams(lower(col("query")))
let t = unigrams(lower(col("ad_title")))
input overlap  = hash(intersect(q, t), buckets=4096)
input query    = hash(q, buckets=4096)
input category = hash(col("ad_category"), buckets=64)
input device   = hash(col("device"), buckets=16)
input price    = bucketize(col("bid_price"), boundaries=[0.1, 0.5, 1, 5])
"""


@pytest.fixture(scope="session")
def repo() -> str:
    return REPO


@pytest.fixture(scope="session")
def bin_dir(tmp_path_factory) -> str:
    """A directory with sigd, sigctl and reader, built from this repository."""
    if os.environ.get("SIG_PY_BIN"):
        return os.environ["SIG_PY_BIN"]
    return build_binaries(REPO, str(tmp_path_factory.mktemp("bin")))


@pytest.fixture(scope="session")
def stack(bin_dir):
    """The session's SIG stack (DevStack); tests that kill or stop its
    processes start them again before they return."""
    st = DevStack.start(REPO, events=EVENTS, rows_per_block=ROWS_PER_BLOCK, readers=2, bin_dir=bin_dir)
    yield st
    st.close()


@pytest.fixture(scope="session")
def ctr_pipeline(stack):
    """ctr/flight: CTR_GRAPH over [START, END), submitted and complete."""
    c = stack.client()
    try:
        c.submit(CTR_GRAPH, client="ctr", pipeline="flight", start=START, end=END)
        c.wait("ctr", "flight", timeout=120)
    finally:
        c.close()
    return "ctr", "flight"


def go_read(stack, tmp_dir: str, client: str, pipeline: str, batch_rows: int = 0, mode: str = "memo"):
    """The Go client's batches of a pipeline (sigctl read): a list per unit,
    in event order, of (block id, [each batch's Arrow IPC stream bytes])."""
    out = os.path.join(tmp_dir, "go-" + pipeline)
    subprocess.run([os.path.join(stack.bin, "sigctl"), "read", "--sigd", stack.sigd_addr,
                    "--token", stack.tokens["trainer-" + client], "--client", client, "--pipeline", pipeline,
                    "--readers", ",".join(stack.reader_addrs), "--out", out, "--batch-rows", str(batch_rows),
                    "--mode", mode.replace("_", "-")], check=True, stdout=subprocess.DEVNULL)
    units = []
    for d in sorted(glob.glob(os.path.join(out, "unit-*"))):
        with open(os.path.join(d, "block")) as f:
            block = f.read().strip()
        batches = []
        for p in sorted(glob.glob(os.path.join(d, "batch-*.arrows"))):
            with open(p, "rb") as f:
                batches.append(f.read())
        units.append((block, batches))
    return units


def ipc_parts(stream: bytes):
    """The schema and the one record batch of an Arrow IPC stream, and the
    batch message's body (its buffers, as the bytes on the wire)."""
    msgs = pa.ipc.MessageReader.open_stream(pa.BufferReader(stream))
    msgs.read_next_message()  # the schema
    body = msgs.read_next_message().body.to_pybytes()
    rd = pa.ipc.open_stream(stream)
    return rd.schema, rd.read_next_batch(), body


def received_body(batch: pa.RecordBatch) -> bytes:
    """The body of the FlightData a batch was decoded from: pyarrow decodes
    without copying, so every buffer of the batch is a slice of it."""
    parents = set()
    for col in batch.columns:
        for b in col.buffers():  # the children's too
            if b is not None:
                parents.add((b.parent.address, b.parent.size) if b.parent is not None else (b.address, b.size))
    assert len(parents) == 1, f"the batch's buffers come from {len(parents)} allocations, not one body"
    addr, size = parents.pop()
    return pa.foreign_buffer(addr, size, base=batch).to_pybytes()
