"""A local SIG stack for tests and examples: `sigd dev` (embedded MinIO and
Kafka), Ads events generated into Kafka and ingested into raw blocks, remote
memoization workers (`sigd worker`) and readers (`reader --sigd`), each a
subprocess of the repository's binaries, on loopback ports.

    with DevStack.start(repo_root) as stack:
        client = stack.client()

Binaries are built from the repository with `go build` into a temporary
directory (or taken from $SIG_PY_BIN, a directory holding sigd, sigctl and
reader). MinIO comes from $SIG_MINIO_BIN or the repository's bin/minio
(`make deps`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from .client import Client

EPOCH = "2026-01-01T00:00:00Z"


def free_addr() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return "127.0.0.1:%d" % s.getsockname()[1]


def build_binaries(repo: str, out: str) -> str:
    """Builds sigd, sigctl and reader into out (go build) and returns out."""
    cmd = ["go", "build", "-o", out + "/", "./cmd/sigd", "./cmd/sigctl", "./cmd/reader"]
    subprocess.run(cmd, cwd=repo, check=True)
    return out


class Proc:
    """A subprocess whose stderr goes to a log file."""

    def __init__(self, name: str, args: list[str], log_dir: str, cwd: str, env: dict | None = None):
        self.name = name
        self.log_path = os.path.join(log_dir, name + ".log")
        self.log = open(self.log_path, "wb")
        self.p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log, cwd=cwd,
                                  env={**os.environ, **(env or {})})

    def wait_line(self, pattern: str, timeout: float = 60, stream: str = "stdout") -> re.Match:
        """Waits for a line of stdout (or of the stderr log) matching pattern."""
        rx = re.compile(pattern)
        deadline = time.time() + timeout
        if stream == "stdout":
            while time.time() < deadline:
                line = self.p.stdout.readline().decode()
                if not line and self.p.poll() is not None:
                    break
                m = rx.search(line)
                if m:
                    return m
        else:
            while time.time() < deadline and self.p.poll() is None:
                with open(self.log_path, errors="replace") as f:
                    m = rx.search(f.read())
                if m:
                    return m
                time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not print /{pattern}/ (exit {self.p.poll()}); log:\n{self.tail()}")

    def tail(self, n: int = 4000) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL, as a crash."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGKILL)
        self.p.wait()

    def stop(self, timeout: float = 15) -> None:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()


class DevStack:
    """sigd dev with ingested events, readers and workers (see the module
    doc). Tokens are sigd dev's development tokens (tokens[name])."""

    def __init__(self, repo: str, work: str, bin_dir: str):
        self.repo = repo
        self.work = work
        self.bin = bin_dir
        self.procs: list[Proc] = []
        self.readers: list[Proc] = []
        self.reader_addrs: list[str] = []
        self.workers: Proc | None = None

    @classmethod
    def start(cls, repo: str, *, events: int = 6000, events_per_second: float = 1.0, rows_per_block: int = 2000,
              readers: int = 2, workers: bool = True, bin_dir: str | None = None) -> "DevStack":
        """Starts sigd dev, ingests events (one per events_per_second of event
        time from EPOCH, sealed into blocks of at most rows_per_block rows
        per hourly window), then the readers and (if workers) the workers."""
        work = tempfile.mkdtemp(prefix="sig-devstack-")
        if bin_dir is None:
            bin_dir = os.environ.get("SIG_PY_BIN") or build_binaries(repo, os.path.join(work, "bin"))
        s = cls(repo, work, bin_dir)
        try:
            s._start_sigd(rows_per_block)
            s._ingest(events, events_per_second)
            s.reader_addrs = [free_addr() for _ in range(readers)]
            for i in range(readers):
                s.start_reader(i)
            if workers:
                s.start_workers()
        except BaseException:
            s.close()
            raise
        return s

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _proc(self, name, args, env=None) -> Proc:
        env = dict(env or {})
        if "SIG_MINIO_BIN" not in os.environ and os.path.exists(os.path.join(self.repo, "bin", "minio")):
            env["SIG_MINIO_BIN"] = os.path.join(self.repo, "bin", "minio")
        p = Proc(name, args, self.work, self.repo, env)
        self.procs.append(p)
        return p

    def _start_sigd(self, rows_per_block: int) -> None:
        data = os.path.join(self.work, "sigd-data")
        self.sigd_addr = free_addr()
        self.sigd = self._proc("sigd", [
            os.path.join(self.bin, "sigd"), "dev", "--data-dir", data, "--listen", self.sigd_addr,
            "--http", free_addr(), "--rows-per-block", str(rows_per_block), "--seal-after", "1s",
            "--remote-workers", "--workers-min", "1", "--lease", "5s"])
        self.sigd.wait_line(r"sigd: listening grpc=", timeout=120, stream="stderr")
        with open(os.path.join(data, "tokens.json")) as f:
            self.tokens = {e["name"]: e["token"] for e in json.load(f)["tokens"]}
        with open(os.path.join(data, "dev.json")) as f:
            self.dev = json.load(f)
        self.tokens_file = os.path.join(data, "tokens.json")

    def _s3_args(self) -> list[str]:
        return ["--s3-endpoint", self.dev["s3_endpoint"], "--s3-access-key", self.dev["s3_access_key"],
                "--s3-secret-key", self.dev["s3_secret_key"], "--s3-bucket", "sig"]

    def _ingest(self, events: int, rate: float) -> None:
        subprocess.run([os.path.join(self.bin, "sigctl"), "gen", "--kafka-brokers", self.dev["kafka_brokers"],
                        "--events", str(events), "--events-per-second", str(rate), "--late-fraction", "-1",
                        "--start-time", EPOCH], cwd=self.repo, check=True, stdout=subprocess.DEVNULL)
        c = Client(sigd=self.sigd_addr, token=self.tokens["operator"])
        try:
            deadline = time.time() + 120
            while True:
                rows = sum(b.rows for b in self.blocks(c))
                if rows >= events:
                    return
                if time.time() > deadline:
                    raise RuntimeError(f"ingested {rows} of {events} events; sigd log:\n{self.sigd.tail()}")
                time.sleep(0.2)
        finally:
            c.close()

    def blocks(self, c: Client):
        from ._proto.sig.v1 import sig_pb2

        out, token = [], ""
        while True:
            resp = c._sigd_stub().ListBlocks(sig_pb2.ListBlocksRequest(source="ads", page_token=token),
                                             metadata=c._md(), timeout=30)
            out.extend(resp.blocks)
            token = resp.next_page_token
            if not token:
                return out

    def start_reader(self, i: int) -> Proc:
        """Starts reader i on its address (again, after a kill)."""
        locs = ",".join("grpc+tcp://" + a for a in self.reader_addrs)
        p = self._proc(f"reader{i}", [
            os.path.join(self.bin, "reader"), "--listen", self.reader_addrs[i], "--tokens", self.tokens_file,
            "--sigd", self.sigd_addr, "--sigd-token", self.tokens["reader"], "--flight-locations", locs,
            "--log-level", "warn"] + self._s3_args())
        p.wait_line(r"listening on ", timeout=60)
        while len(self.readers) <= i:
            self.readers.append(None)
        self.readers[i] = p
        return p

    def start_workers(self) -> Proc:
        self.workers = self._proc("workers", [
            os.path.join(self.bin, "sigd"), "worker", "--sigd", self.sigd_addr, "--token", self.tokens["worker"],
            "--concurrency", "2"] + self._s3_args())
        self.workers.wait_line(r"workers leasing from", timeout=60, stream="stderr")
        return self.workers

    def stop_workers(self) -> None:
        if self.workers is not None:
            self.workers.stop()
            self.workers = None

    def client(self, principal: str = "trainer-ctr", **kw) -> Client:
        return Client(sigd=self.sigd_addr, readers=self.reader_addrs, token=self.tokens[principal], **kw)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.tail(2000)}" for p in self.procs)

    def close(self) -> None:
        for p in reversed(self.procs):
            try:
                p.stop()
            except Exception:  # noqa: BLE001 - best effort
                pass
        shutil.rmtree(self.work, ignore_errors=True)


if __name__ == "__main__":
    # python -m sig_client.devstack REPO: start a stack and keep it up.
    st = DevStack.start(sys.argv[1] if len(sys.argv) > 1 else ".")
    print(json.dumps({"sigd": st.sigd_addr, "readers": st.reader_addrs, "tokens": st.tokens}, indent=2))
    try:
        signal.pause()
    finally:
        st.close()
