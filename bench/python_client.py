"""bench/python.sh's driver: the Python client's examples/s against the Go
client's on the same units (see python.sh). Prints the report on stdout."""

from __future__ import annotations

import os
import re
import resource
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python"))

import sig_client  # noqa: E402
from sig_client.devstack import EPOCH, DevStack  # noqa: E402

EVENTS = int(os.environ.get("EVENTS", "200000"))
ROWS_PER_BLOCK = int(os.environ.get("ROWS_PER_BLOCK", "50000"))
COUNT = int(os.environ.get("COUNT", "5"))
BATCH_ROWS = 4096
with open(os.path.join(REPO, "examples", "fleet", "ctr_small.sig")) as f:
    GRAPH = f.read()


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def go_run(stack) -> tuple[int, float, float]:
    """sigctl read (reader.Client, every batch decoded, nothing written):
    rows, and wall and CPU seconds of its read loop (sigctl's own clock and
    getrusage, printed)."""
    out = subprocess.run([os.path.join(stack.bin, "sigctl"), "read", "--sigd", stack.sigd_addr,
                          "--token", stack.tokens["trainer-ctr"], "--client", "ctr", "--pipeline", "bench",
                          "--readers", ",".join(stack.reader_addrs), "--batch-rows", str(BATCH_ROWS)],
                         check=True, capture_output=True, text=True).stdout
    m = re.search(r"(\d+) rows in ([\d.]+)s \(\d+ examples/s, (\d+) cpu-ns/example\)", out)
    rows = int(m.group(1))
    return rows, float(m.group(2)), int(m.group(3)) * rows / 1e9


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def py_run(stack, kind: str) -> tuple[int, float, float]:
    """The Python client in this process: rows, wall and CPU seconds of the
    read (Flight GetFlightInfo and DoGet of every block), consuming each
    batch as kind: RecordBatch (decoded by pyarrow, zero-copy), numpy dicts
    (to_numpy), the JAX iterator (padded, on the device), the PyTorch
    IterableDataset through a DataLoader (batch_size=None; in this process,
    or in 2 fork-start workers, whose CPU counts too: they are waited for
    when the loop ends) or the tf.data Dataset (one parallel read)."""
    c = stack.client()
    stream = c.read("ctr", "bench", batch_rows=BATCH_ROWS)
    rows = 0
    t0, c0, k0 = time.perf_counter(), self_cpu(), children_cpu()
    if kind in ("torch", "torch2"):
        from torch.utils.data import DataLoader

        from sig_client.torch_data import SigIterableDataset

        ds = SigIterableDataset(c, "ctr", "bench", world_size=1, rank=0, batch_rows=BATCH_ROWS)
        workers = 2 if kind == "torch2" else 0
        for b in ds.track(DataLoader(ds, batch_size=None, num_workers=workers,
                                     multiprocessing_context="fork" if workers else None)):
            rows += len(b["event_id"])
    elif kind == "tf":
        from sig_client.tf_data import SigTFData

        src = SigTFData(c, "ctr", "bench", batch_rows=BATCH_ROWS)
        for x in src.track(src.dataset()):
            rows += int(x["event_id"].shape[0])
    elif kind == "recordbatch":
        for b in stream:
            rows += b.num_rows
    elif kind == "numpy":
        for d in stream.numpy():
            rows += len(d["event_id"])
    else:
        from sig_client.jax_input import JaxIterator

        for x in JaxIterator(stream, batch_rows=BATCH_ROWS, values_bucket=8192):
            x["weight"].block_until_ready()
            rows += int(x["weight"].sum())
    el, cpu = time.perf_counter() - t0, self_cpu() - c0 + children_cpu() - k0
    c.close()
    return rows, el, cpu


def main() -> None:
    stack = DevStack.start(REPO, events=EVENTS, events_per_second=EVENTS / 3000, rows_per_block=ROWS_PER_BLOCK,
                           readers=1, bin_dir=os.environ.get("SIG_PY_BIN") or None)
    try:
        c = stack.client()
        c.submit(GRAPH, client="ctr", pipeline="bench", start=EPOCH, end="2026-01-01T01:00:00Z")
        sol = c.wait("ctr", "bench", timeout=600)
        blocks = len(sol.inputs[0].blocks)
        c.close()
        arms = {"go": lambda: go_run(stack)}
        for k in ("recordbatch", "numpy", "jax", "torch", "torch2", "tf"):
            arms[k] = lambda k=k: py_run(stack, k)
        for f in arms.values():  # warm up: the reader's caches, JAX's compilation
            f()
        res = {k: [] for k in arms}
        for _ in range(COUNT):  # alternating, so that drift hits every arm alike
            for k, f in arms.items():
                rows, el, cpu = f()
                assert rows == EVENTS, (k, rows)
                res[k].append((rows / el, cpu * 1e9 / rows))
    finally:
        stack.close()
    names = {"go": "Go client (reader.Client, sigctl read)", "recordbatch": "Python: pyarrow RecordBatch (Flight)",
             "numpy": "Python: numpy dicts", "jax": "Python: JAX iterator (padded)",
             "torch": "Python: torch DataLoader, in-process", "torch2": "Python: torch DataLoader, 2 fork workers",
             "tf": "Python: tf.data Dataset"}
    go_eps = statistics.median(r[0] for r in res["go"])
    print(f"# {EVENTS} events in {blocks} blocks of ctr_small ({len(sol.inputs)} inputs), every input from its memo"
          f" object; {BATCH_ROWS}-row batches; one reader process; one stream at a time")
    print(f"# medians of {COUNT} runs, arms alternating; wall = the read loop; CPU = the client process's"
          " during it (getrusage; Go: sigctl's, printed by it)")
    print()
    go_cpu = statistics.median(r[1] for r in res["go"])
    print(f"{'':42s} {'examples/s':>11s} {'vs Go':>6s} {'CPU ns/example':>15s} {'examples/cpu-s':>15s} {'vs Go':>6s}")
    for k, v in res.items():
        eps = statistics.median(r[0] for r in v)
        cpu = statistics.median(r[1] for r in v)
        print(f"{names[k]:42s} {eps:11.0f} {eps / go_eps:6.2f} {cpu:15.0f} {1e9 / cpu:15.0f} {go_cpu / cpu:6.2f}")
    print()
    print("# examples/s is one stream's wall rate (the reader's CPU, loopback and the client's together: it moves"
          " with the machine's load); examples/cpu-s is the client's alone, per core")
    print("# why the RecordBatch arm costs less CPU than Go's (from the code, not measured apart): pyarrow decodes"
          " each FlightData body in place; reader.Client copies the response out of the gRPC message, copies every"
          " buffer out of it again (Arrow Go's IPC reader over a bytes.Reader), decodes each batch's schema message"
          " and computes the stream's CRC-32C")
    print("# torch: SigIterableDataset (sig_client.torch_data) as a DataLoader's dataset, batch_size=None, every batch"
          " a dict of tensors (list inputs as EmbeddingBag's values + offsets); 2 fork workers: the CPU of the"
          " workers (which read over grpcio: a child of a process that used pyarrow.flight) and of this process"
          " (collating and receiving their tensors); tf: SigTFData (sig_client.tf_data), list inputs as"
          " tf.RaggedTensor, the CPU of every TF thread of this process")
    print()
    print("# runs (examples/s, CPU ns/example)")
    for k, v in res.items():
        print(f"{k:12s} " + "  ".join(f"{e:.0f}/{c:.0f}" for e, c in v))


if __name__ == "__main__":
    main()
