"""The SIG client: submit a graph to sigd, wait for its read solution, and
read the pipeline's batches from the readers through Arrow Flight."""

from __future__ import annotations

import ctypes
import datetime as _dt
import os
import random
import sys
import time
from typing import Callable, Iterator, Sequence

import grpc
import pyarrow as pa
import pyarrow.flight as flight

from . import errors
from ._proto.reader.v1 import reader_pb2
from ._proto.sig.v1 import sig_pb2, sig_pb2_grpc
from .state import ReadState

MODES = {
    "memo": reader_pb2.FLIGHT_MODE_MEMO,
    "local": reader_pb2.FLIGHT_MODE_LOCAL,
    "ready_else_local": reader_pb2.FLIGHT_MODE_READY_ELSE_LOCAL,
}


def _micros(t) -> int:
    if isinstance(t, _dt.datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=_dt.timezone.utc)
        return int(t.timestamp() * 1_000_000)
    if isinstance(t, str):
        return _micros(_dt.datetime.fromisoformat(t.replace("Z", "+00:00")))
    return int(t)


def event_range(start, end) -> sig_pb2.EventRange:
    """An event range [start, end): datetimes (naive ones are UTC), RFC 3339
    strings or microseconds since the epoch."""
    return sig_pb2.EventRange(start_micros=_micros(start), end_micros=_micros(end))


class Progress:
    """A read solution's progress, as Client.wait reports it."""

    def __init__(self, sol: sig_pb2.ReadSolution):
        self.solution = sol
        self.ready = sol.blocks_ready
        self.pending = sol.blocks_pending
        self.failed = sol.blocks_failed
        self.complete = sol.complete

    @property
    def total(self) -> int:
        return self.ready + self.pending + self.failed

    def __str__(self) -> str:
        return f"{self.ready}/{self.total} blocks ready, {self.pending} pending, {self.failed} failed"


def print_progress(p: Progress) -> None:
    """A progress callback for long waits: one line per change on stderr."""
    print(f"sig: {p}", file=sys.stderr, flush=True)


class Client:
    """Talks to sigd (gRPC, sig.v1.SIG) and to the readers (Arrow Flight).

    sigd is sigd's gRPC address (host:port); readers are reader addresses
    (host:port or grpc+tcp:// URIs), used for GetFlightInfo and for tickets
    whose endpoints name no location. token is a bearer token valid at both
    (role trainer, or operator; `sigd dev` writes trainer-<client>).
    A block whose stream fails is retried up to max_attempts times in a row
    without progress (jittered exponential backoff from initial_backoff to
    max_backoff seconds), each time on the next of its locations.
    """

    def __init__(self, sigd: str | None = None, readers: Sequence[str] = (), token: str = "",
                 max_attempts: int = 6, initial_backoff: float = 0.05, max_backoff: float = 2.0,
                 flight_options: Sequence[tuple] = ()):
        self.sigd = sigd or ""
        self.token = token
        # gRPC channel arguments of the Flight connections (pyarrow's
        # generic_options), e.g. ("grpc.http2.lookahead_bytes", n) to bound
        # how far a stream is read ahead of the consumer.
        self.flight_options = list(flight_options)
        self.readers = [r if "://" in r else "grpc+tcp://" + r for r in readers]
        self.max_attempts = max_attempts
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self._next_reader = random.randrange(len(self.readers)) if self.readers else 0
        self.stats = {"attempts": 0, "retries": 0, "resumes": 0}
        self._connections()

    def _connections(self) -> None:
        """No connection yet: they are opened on first use, in the process
        that uses them."""
        self._pid = os.getpid()
        self._flights: dict[str, flight.FlightClient] = {}
        self._sigd = None
        self._channel = None

    def _own(self) -> None:
        """Fork safety: gRPC and Flight channels do not survive fork (their
        threads stay in the parent, their sockets would be shared). In a
        child process (the pid changed: a fork-start DataLoader worker, a
        multiprocessing fork) the parent's channels are left alone, neither
        used nor closed nor freed (closing one runs gRPC's shutdown of
        threads that do not exist in the child), and fresh ones are opened
        on first use: grpcio channels, for sigd and for the readers' Flight
        calls too when the parent had used pyarrow.flight, whose gRPC core
        a forked child cannot use (sig_client._grpc_flight)."""
        if self._pid == os.getpid():
            return
        _abandon((self._channel, self._sigd, self._flights))
        self._connections()

    def __getstate__(self):
        # Pickled (a spawn-start worker): the configuration, no connection.
        d = {k: v for k, v in self.__dict__.items() if k not in ("_flights", "_sigd", "_channel", "_pid")}
        return d

    def __setstate__(self, d):
        self.__dict__.update(d)
        self._connections()

    def _close_flights(self) -> None:
        for c in self._flights.values():
            c.close()
        self._flights.clear()

    def close(self) -> None:
        """Closes this process's connections (a forked child's copy of the
        parent's are left alone: see _own)."""
        self._own()
        self._close_flights()
        if self._channel is not None:
            self._channel.close()
        self._channel = None
        self._sigd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ sigd

    def _md(self):
        return [("authorization", "Bearer " + self.token)] if self.token else []

    def _sigd_stub(self):
        self._own()
        if self._sigd is None:
            if not self.sigd:
                raise errors.SigError("this client has no sigd address")
            self._channel = grpc.insecure_channel(self.sigd, options=[("grpc.max_receive_message_length", 64 << 20)])
            self._sigd = sig_pb2_grpc.SIGStub(self._channel)
        return self._sigd

    def submit(self, dsl: str, *, client: str, pipeline: str, start, end, priority: int = 0,
               raw_source: str = "ads", timeout: float = 60) -> sig_pb2.SubmitGraphResponse:
        """Submits a graph (DSL text) for a pipeline over the event range
        [start, end); returns sigd's response (its read solution and what
        the submit enqueued)."""
        req = sig_pb2.SubmitGraphRequest(client=client, pipeline=pipeline, priority=priority,
                                         graph=sig_pb2.GraphSpec(dsl=dsl, raw_source=raw_source),
                                         range=event_range(start, end))
        try:
            return self._sigd_stub().SubmitGraph(req, metadata=self._md(), timeout=timeout)
        except grpc.RpcError as e:
            raise errors.from_grpc(e) from None

    def _retrying(self, call):
        """call() again while it fails as unavailable (UnavailableError: not
        a deadline, which already took the caller's time, nor a pending
        memo), up to max_attempts times with the reads' jittered backoff:
        a transient failure of a connection, such as grpcio's in a freshly
        forked child (grpc/grpc#40136: its fork support may close a
        descriptor under a new channel's first call), is not the caller's
        error. For calls that change nothing."""
        backoff = self.initial_backoff
        for attempt in range(1, self.max_attempts + 1):
            try:
                return call()
            except errors.SigError as e:
                if not isinstance(e, errors.UnavailableError) or attempt == self.max_attempts:
                    raise
            time.sleep(backoff / 2 + random.random() * backoff / 2)
            backoff = min(2 * backoff, self.max_backoff)

    def solution(self, client: str, pipeline: str, rng: sig_pb2.EventRange | None = None,
                 timeout: float = 60) -> sig_pb2.ReadSolution:
        """The pipeline's read solution now (retried while sigd is
        unavailable, as reads are: timeout bounds each attempt, so the call
        may take up to max_attempts times it)."""
        def call():
            try:
                return self._sigd_stub().GetReadSolution(
                    sig_pb2.GetReadSolutionRequest(client=client, pipeline=pipeline, range=rng),
                    metadata=self._md(), timeout=timeout)
            except grpc.RpcError as e:
                raise errors.from_grpc(e) from None
        return self._retrying(call)

    def watch(self, client: str, pipeline: str, rng: sig_pb2.EventRange | None = None,
              timeout: float | None = None) -> Iterator[Progress]:
        """Follows the read solution (WatchReadSolution): yields its progress
        at once and at every change, until it is complete."""
        stream = None
        try:
            stream = self._sigd_stub().WatchReadSolution(
                sig_pb2.WatchReadSolutionRequest(client=client, pipeline=pipeline, range=rng),
                metadata=self._md(), timeout=timeout)
            sol = None
            for up in stream:
                if up.HasField("solution"):
                    sol = up.solution
                elif sol is not None:
                    # Changes between full solutions: count states anew.
                    sol = _apply_changes(sol, up.changes)
                if sol is not None:
                    yield Progress(sol)
        except grpc.RpcError as e:
            raise errors.from_grpc(e) from None
        finally:
            # The caller stopped following (or it failed): end the call.
            if stream is not None:
                stream.cancel()

    def wait(self, client: str, pipeline: str, rng: sig_pb2.EventRange | None = None,
             timeout: float | None = None, progress: Callable[[Progress], None] | None = None) -> sig_pb2.ReadSolution:
        """Waits until the read solution is complete and returns it;
        progress (e.g. print_progress) is called at every change.

        A failed block (its memoization task quarantined) cannot turn ready
        until an operator releases it, so wait raises MemoFailedError as
        soon as the solution has one: .input, .component and .block name
        the first, .failures lists every failed entry with sigd's reason.
        timeout (seconds, for the whole wait) raises DeadlineExceededError,
        a TimeoutError."""
        last = None
        t0 = time.monotonic()
        watch = self.watch(client, pipeline, rng, timeout)
        try:
            for p in watch:
                if progress is not None:
                    progress(p)
                last = p
                if p.complete:
                    return p.solution
                if p.failed:
                    raise memo_failed(p.solution)
        except errors.SigError as e:
            # At the deadline the stream may end as reset (RST_STREAM,
            # CANCEL) rather than DEADLINE_EXCEEDED, whichever side's
            # timer fired first: past the timeout, it is the timeout.
            expired = timeout is not None and time.monotonic() - t0 >= timeout
            if not isinstance(e, errors.DeadlineExceededError) and not (expired and type(e) in (errors.SigError, errors.UnavailableError)):
                raise
            raise errors.DeadlineExceededError(
                f"wait for {client}/{pipeline}: the read solution was not complete within {timeout}s "
                f"({last if last is not None else 'no progress received'})", code="DEADLINE_EXCEEDED") from None
        finally:
            watch.close()
        if last is not None and last.complete:
            return last.solution
        raise errors.UnavailableError("the watch ended before the read solution was complete", code="UNAVAILABLE")

    # --------------------------------------------------------------- readers

    def _flight(self, location: str):
        """This process's connection to a reader: a pyarrow FlightClient, or
        in a process forked from one that used pyarrow.flight a grpcio
        one (_grpc_flight.Connection)."""
        global _PYARROW_FLIGHT_PID
        self._own()
        c = self._flights.get(location)
        if c is None:
            if _pyarrow_flight_inherited():
                from ._grpc_flight import Connection

                c = Connection(location, self.flight_options)
            else:
                c = flight.FlightClient(location, generic_options=self.flight_options or None)
                if _PYARROW_FLIGHT_PID is None:
                    _PYARROW_FLIGHT_PID = os.getpid()
            self._flights[location] = c
        return c

    def _get_flight_info(self, location: str, command: bytes, timeout: float | None) -> flight.FlightInfo:
        c = self._flight(location)
        if isinstance(c, flight.FlightClient):
            try:
                return c.get_flight_info(flight.FlightDescriptor.for_command(command), self._options(timeout))
            except Exception as e:  # noqa: BLE001 - pyarrow raises several kinds
                raise errors.from_flight(e) from None
        try:
            return c.get_flight_info(command, self._md(), timeout)
        except grpc.RpcError as e:
            raise _stream_error(e) from None

    def _do_get(self, location: str, ticket: bytes):
        """A DoGet's reader: read_chunk() gives chunks (data, app_metadata)
        and raises StopIteration at the end, or a SigError."""
        c = self._flight(location)
        if isinstance(c, flight.FlightClient):
            try:
                return _Chunks(c.do_get(flight.Ticket(ticket), self._options()), errors.from_flight, Exception)
            except Exception as e:  # noqa: BLE001
                raise errors.from_flight(e) from None
        return _Chunks(c.do_get(ticket, self._md()), _stream_error, grpc.RpcError)

    def _options(self, timeout: float | None = None) -> flight.FlightCallOptions:
        headers = [(b"authorization", ("Bearer " + self.token).encode())] if self.token else []
        return flight.FlightCallOptions(headers=headers, timeout=timeout)

    def command(self, client: str, pipeline: str, *, start=None, end=None, batch_rows: int = 0,
                labels: Sequence[str] = (), mode: str = "memo") -> bytes:
        """The marshaled FlightCommand of a pipeline's read: its event range
        ([start, end); none: the range of its last submit), batch size
        (0: the reader's 4096), label columns (none: click, conversion) and
        mode ("memo": SIG, every input from its memo object; "local": LIG;
        "ready_else_local")."""
        if mode not in MODES:
            raise errors.InvalidArgumentError(f"mode {mode!r}: want one of {sorted(MODES)}", code="INVALID_ARGUMENT")
        cmd = reader_pb2.FlightCommand(client=client, pipeline=pipeline, batch_rows=batch_rows,
                                       label_columns=list(labels), mode=MODES[mode])
        if start is not None or end is not None:
            cmd.range.CopyFrom(event_range(start, end))
        return cmd.SerializeToString()

    def flight_info(self, command: bytes, timeout: float = 60) -> flight.FlightInfo:
        """GetFlightInfo of a command on the readers (the first that
        answers): one endpoint per raw block, in event order."""
        if not self.readers:
            raise errors.SigError("this client has no reader addresses")

        def call():
            last = None
            for i in range(len(self.readers)):
                loc = self.readers[(self._next_reader + i) % len(self.readers)]
                try:
                    return self._get_flight_info(loc, command, timeout)
                except errors.SigError as e:
                    last = e
                    if not last.retryable or isinstance(last, errors.MemoPendingError):
                        raise last from None
            raise last
        return self._retrying(call)

    def read(self, client: str | None = None, pipeline: str | None = None, *, state: ReadState | None = None,
             **command) -> "Stream":
        """A pipeline's batches (see Stream). Either client and pipeline (and
        the options of command()), or a saved state to resume from."""
        if state is None:
            if client is None or pipeline is None:
                raise errors.InvalidArgumentError("read needs client and pipeline, or a state", code="INVALID_ARGUMENT")
            state = ReadState(command=self.command(client, pipeline, **command))
        return Stream(self, state)

    def _locations(self, ep: flight.FlightEndpoint) -> list[str]:
        locs = [loc.uri.decode() if isinstance(loc.uri, bytes) else loc.uri for loc in ep.locations]
        return locs or list(self.readers)


# The connections of a parent process that a forked child abandoned (see
# Client._own): referenced for good, so that neither the child's garbage
# collection nor its interpreter's shutdown frees (and so closes) them.
_ABANDONED: list = []


def _abandon(conns) -> None:
    _ABANDONED.append(conns)
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(conns))


# The process whose pyarrow.flight gRPC core is in use: the first that
# opened a pyarrow FlightClient. A process forked from it (the pid differs)
# reads over grpcio instead (_grpc_flight's doc says why).
_PYARROW_FLIGHT_PID: int | None = None


def _pyarrow_flight_inherited() -> bool:
    return _PYARROW_FLIGHT_PID is not None and _PYARROW_FLIGHT_PID != os.getpid()


def _stream_error(e: grpc.RpcError) -> errors.SigError:
    """The SigError of a reader call over grpcio: as sigd's, and a stream
    reset without a reason (a dying reader) UNAVAILABLE, as from_flight."""
    err = errors.from_grpc(e)
    if err.code == "INTERNAL" and not err.reason:
        return errors.UnavailableError(err.message, code=err.code)
    return err


class _Chunks:
    """A DoGet's reader whose transport errors are SigErrors."""

    def __init__(self, reader, convert, kinds):
        self.reader = reader
        self.convert = convert
        self.kinds = kinds

    def read_chunk(self):
        try:
            return self.reader.read_chunk()
        except StopIteration:
            raise
        except self.kinds as e:
            raise self.convert(e) from None


def failed_blocks(sol: sig_pb2.ReadSolution) -> list[errors.FailedBlock]:
    """The failed memo entries of a read solution (an input's blocks, and
    those of the memo nodes of a computed input's cover), in input order."""
    out = []
    for inp in sol.inputs:
        for b in inp.blocks:
            if b.state == sig_pb2.BLOCK_STATE_FAILED:
                out.append(errors.FailedBlock(inp.input, inp.component_key, b.block_id, b.reason))
        for node in inp.memo_nodes:
            for b in node.blocks:
                if b.state == sig_pb2.BLOCK_STATE_FAILED:
                    out.append(errors.FailedBlock(inp.input, node.key, b.block_id, b.reason))
    return out


def memo_failed(sol: sig_pb2.ReadSolution) -> errors.MemoFailedError:
    """The MemoFailedError of a read solution with failed blocks."""
    fails = failed_blocks(sol)
    if not fails:
        # The counts say failed, the entries do not say which (should not
        # happen): still an error naming the pipeline.
        return errors.MemoFailedError(
            f"memo failed: {sol.blocks_failed} blocks of {sol.client}/{sol.pipeline} failed", code="FAILED_PRECONDITION",
            reason="MEMO_FAILED")
    f = fails[0]
    more = f" (and {len(fails) - 1} more failed blocks)" if len(fails) > 1 else ""
    return errors.MemoFailedError(
        f'memo failed: input "{f.input}" (component {f.component}) of block {f.block}: {f.reason or "quarantined"}{more}; '
        "an operator releases it with `sigctl quarantine release`, or read it with mode=\"local\"",
        code="FAILED_PRECONDITION", reason="MEMO_FAILED",
        metadata={"input": f.input, "component": f.component, "block": f.block, "error": f.reason, "failures": fails})


def _apply_changes(sol: sig_pb2.ReadSolution, changes) -> sig_pb2.ReadSolution:
    out = sig_pb2.ReadSolution()
    out.CopyFrom(sol)
    by_key = {}
    for inp in out.inputs:
        by_key.setdefault(inp.component_key, []).append(inp)
    for ch in changes:
        for inp in by_key.get(ch.component_key, []):
            for b in inp.blocks:
                if b.block_id == ch.block.block_id:
                    # What the change says of the entry: a completion
                    # switches its memo object (a pack, issue 28) and
                    # column, not only its state.
                    for f in ("state", "memo_object", "memo_column", "reason", "rows", "bytes", "version"):
                        setattr(b, f, getattr(ch.block, f))
    counts = {sig_pb2.BLOCK_STATE_READY: 0, sig_pb2.BLOCK_STATE_PENDING: 0, sig_pb2.BLOCK_STATE_FAILED: 0}
    for inp in out.inputs:
        for b in inp.blocks:
            if b.state in counts:
                counts[b.state] += 1
    out.blocks_ready = counts[sig_pb2.BLOCK_STATE_READY]
    out.blocks_pending = counts[sig_pb2.BLOCK_STATE_PENDING]
    out.blocks_failed = counts[sig_pb2.BLOCK_STATE_FAILED]
    out.complete = out.blocks_pending == 0 and out.blocks_failed == 0
    return out


class Stream:
    """The batches of a pipeline's read, as pyarrow.RecordBatch.

    Iterating yields every batch of every block in event order: event_id,
    the labels, then one column per model input. After each batch, state is
    the ReadState of the rows not yet delivered: save it (ReadState.save) and
    a new process resumes with Client.read(state=ReadState.load(path)),
    delivering exactly the rows that follow. A reader that dies mid-stream
    costs a retry on the next reader from the first row not yet delivered
    (the batches are aligned to the block, so they are the same bytes).
    Pending memo data raises MemoPendingError at once; iterating the stream
    again (after Client.wait) resolves the read anew (GetFlightInfo) and
    continues from state, so nothing delivered before is repeated. A stream
    is one pass over the pipeline from its state: once done, iterating it
    again yields nothing (Client.read again for another epoch).

    len(stream) is the rows of the read solution (all its blocks, whatever
    the state), from the readers' GetFlightInfo (total_records).
    """

    def __init__(self, client: Client, state: ReadState):
        self.client = client
        self.state = state.copy()
        self.info: flight.FlightInfo | None = None
        # The reader the current block is read from (its Flight location).
        self.location = ""
        # Whether an iteration began with the current info: a new one
        # resolves the read anew (its blocks may have turned ready).
        self._iterated = False

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return self._batches()

    def __len__(self) -> int:
        n = self._info().total_records
        if n < 0:
            raise TypeError("the readers did not say how many rows the read solution holds (total_records -1)")
        return n

    def numpy(self) -> Iterator[dict]:
        """The batches as dicts of numpy arrays (sig_client.arrays.to_numpy;
        a column holding nulls is a numpy masked array)."""
        from .arrays import to_numpy

        for b in self:
            yield to_numpy(b)

    def read_all(self) -> pa.Table:
        """The rest of the stream (every batch from state on) as one
        pyarrow.Table; state then is at the end."""
        schema = self.schema
        return pa.Table.from_batches(list(self), schema=schema)

    to_table = read_all

    @property
    def schema(self) -> pa.Schema:
        return self._info().schema

    def _info(self) -> flight.FlightInfo:
        if self.info is None:
            self.info = self.client.flight_info(self.state.command)
            self._iterated = False
        return self.info

    def _plan(self) -> list[flight.FlightEndpoint]:
        """The endpoints to read: the read resolved anew when an iteration
        already began with the current ones."""
        if self._iterated:
            self.info = None
        info = self._info()
        self._iterated = True
        return list(info.endpoints)

    def _batches(self) -> Iterator[pa.RecordBatch]:
        eps = self._plan()
        st = self.state
        if st.block_index > len(eps):
            raise errors.StateMismatchError(
                f"the state is at block {st.block_index}, the read solution has {len(eps)}")
        while st.block_index < len(eps):
            yield from self._endpoint(eps[st.block_index])
            st.block_index += 1
            st.row = 0
            st.block_id = ""

    def _endpoint(self, ep: flight.FlightEndpoint) -> Iterator[pa.RecordBatch]:
        """The batches of one endpoint (state.block_index's) from state.row."""
        st = self.state
        req = reader_pb2.ReadRequest.FromString(ep.ticket.ticket)
        if st.block_id and st.block_id != req.unit.block_id:
            raise errors.StateMismatchError(
                f"the state's block {st.block_index} is {st.block_id}, the read solution's is {req.unit.block_id}")
        st.block_id = req.unit.block_id
        yield from self._block(ep, req)

    def _block(self, ep: flight.FlightEndpoint, req: reader_pb2.ReadRequest) -> Iterator[pa.RecordBatch]:
        c = self.client
        st = self.state
        locs = c._locations(ep)
        at = c._next_reader % len(locs)
        c._next_reader += 1
        failures = 0
        backoff = c.initial_backoff
        while True:
            c.stats["attempts"] += 1
            try:
                req.start_row = st.row
                done = yield from self._attempt(locs[at], req)
                if done:
                    return
                err = errors.UnavailableError(f"reader {locs[at]}: stream of block {st.block_id} ended without its summary",
                                              code="UNAVAILABLE")
            except errors.SigError as e:
                err = e
            progressed = getattr(self, "_progressed", False)
            if progressed:
                failures, backoff = 0, c.initial_backoff
            failures += 1
            if not err.retryable or isinstance(err, errors.MemoPendingError) or failures >= c.max_attempts:
                raise err
            c.stats["retries"] += 1
            if st.row > 0:
                c.stats["resumes"] += 1
            at = (at + 1) % len(locs)
            if not progressed:
                time.sleep(backoff / 2 + random.random() * backoff / 2)
                backoff = min(2 * backoff, c.max_backoff)

    def _attempt(self, loc: str, req: reader_pb2.ReadRequest):
        """One DoGet from state.row; returns True when the block is done."""
        c = self.client
        st = self.state
        self._progressed = False
        start = st.row
        self.location = loc
        reader = c._do_get(loc, req.SerializeToString())
        sent = 0
        while True:
            try:
                chunk = reader.read_chunk()
            except StopIteration:
                # gRPC said OK: a block read from its end has no batch, and
                # so no summary.
                return sent == 0 and start > 0
            batch = chunk.data
            if batch is None:
                continue
            meta = reader_pb2.ReadResponse.FromString(chunk.app_metadata.to_pybytes() if chunk.app_metadata else b"")
            if meta.start_row != st.row or meta.rows != batch.num_rows:
                raise errors.DataLossError(
                    f"reader {loc}: batch at row {meta.start_row} of {meta.rows} rows ({batch.num_rows} decoded), want row {st.row}",
                    code="DATA_LOSS")
            st.row += batch.num_rows
            st.rows += batch.num_rows
            sent += batch.num_rows
            self._progressed = True
            yield batch
            if meta.HasField("summary"):
                s = meta.summary
                if s.rows != sent or s.block_rows != st.row:
                    raise errors.DataLossError(
                        f"reader {loc}: summary ({s.rows} rows of {s.block_rows}) does not match the stream ({sent} rows to row {st.row})",
                        code="DATA_LOSS")
                return True
