"""Typed errors of the SIG client.

Every call to sigd (gRPC) or to a reader (Arrow Flight) that fails raises a
subclass of SigError. Readers attach a google.rpc.ErrorInfo detail (domain
"reader.sig") to every error; pyarrow.flight hands it over as the error's
extra_info (gRPC's grpc-status-details-bin trailer), and the reason decides
the class: a pending memo input is MemoPendingError whatever the transport
made of its UNAVAILABLE code. Without the detail the message decides
("memo pending:" is documented in proto/reader/v1/reader.proto).
"""

from __future__ import annotations

import dataclasses
import re

import grpc
import pyarrow.flight as flight

ERROR_DOMAIN = "reader.sig"


class SigError(Exception):
    """Base class: a SIG call failed. code is the gRPC status code name
    (e.g. "UNAVAILABLE") when known, reason the ErrorInfo reason, metadata
    its metadata (input, component, block, field)."""

    retryable = False

    def __init__(self, message: str, *, code: str = "", reason: str = "", metadata: dict | None = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason
        self.metadata = dict(metadata or {})


class _MemoEntry:
    """input, component and block of a memo error: the model input, its
    component key and the raw block whose memo entry it is about."""

    metadata: dict

    @property
    def input(self) -> str:
        return self.metadata.get("input", "")

    @property
    def component(self) -> str:
        return self.metadata.get("component", "")

    @property
    def block(self) -> str:
        return self.metadata.get("block", "")


class MemoPendingError(_MemoEntry, SigError):
    """A MEMO input's memoized data is not there yet (its block is pending,
    or its object was evicted and is being recomputed). Wait for the read
    solution (Client.wait) and read again from the same ReadState, or read
    with mode="ready_else_local". input, component and block name it."""

    retryable = True


@dataclasses.dataclass(frozen=True)
class FailedBlock:
    """A failed memo entry of a read solution: the input, its component (or
    the memo node of its cover) and raw block, and sigd's reason (the
    quarantined task's last error)."""

    input: str
    component: str
    block: str
    reason: str


class MemoFailedError(_MemoEntry, SigError):
    """A MEMO input's memoization task was quarantined: not retryable until
    an operator releases it (`sigctl quarantine release`, sigd's
    ReleaseQuarantine); the input can be read LOCAL meanwhile
    (mode="local" or "ready_else_local"). input, component and block name
    the (first) failed entry; failures lists every failed entry that
    Client.wait saw in the read solution (a reader's error names one)."""

    @property
    def failures(self) -> list[FailedBlock]:
        f = self.metadata.get("failures")
        if f:
            return list(f)
        return [FailedBlock(self.input, self.component, self.block, self.metadata.get("error", ""))]


class DeadlineExceededError(SigError, TimeoutError):
    """A call, or Client.wait, ran out of its time (DEADLINE_EXCEEDED). A
    builtin TimeoutError too, so `except TimeoutError` catches it."""

    retryable = True


class DataLossError(SigError):
    """An object is corrupt or not row-aligned (reason CORRUPT), or a memo
    object's values differ from what the reader's guard recomputed from the
    raw block (MEMO_MISMATCH; the reader reports either to sigd, which
    recomputes the block), or a stream broke its own framing."""


class AuthError(SigError):
    """The token is missing or unknown (code UNAUTHENTICATED) or may not do
    this (PERMISSION_DENIED)."""


class InvalidArgumentError(SigError):
    """The request is malformed; the message (and metadata["field"]) names
    the field."""


class NotFoundError(SigError):
    """The pipeline, graph or raw block does not exist."""


class UnavailableError(SigError):
    """A server is unreachable or died mid-stream, or the object store is
    down: retryable."""

    retryable = True


class ResourceExhaustedError(SigError):
    """A bound was hit (queued tasks per client, request size)."""


class StateMismatchError(SigError):
    """A saved ReadState does not fit the pipeline's read solution any more
    (its block is not where the state says)."""


_REASONS = {
    "MEMO_PENDING": MemoPendingError,
    "MEMO_FAILED": MemoFailedError,
    "CORRUPT": DataLossError,
    "MEMO_MISMATCH": DataLossError,
    "INVALID_UNIT": InvalidArgumentError,
    "NO_BLOCK": NotFoundError,
    "STORE_UNAVAILABLE": UnavailableError,
    "COMPUTE_FAILED": SigError,
}

_CODES = {
    "UNAUTHENTICATED": AuthError,
    "PERMISSION_DENIED": AuthError,
    "INVALID_ARGUMENT": InvalidArgumentError,
    "NOT_FOUND": NotFoundError,
    "UNAVAILABLE": UnavailableError,
    "DATA_LOSS": DataLossError,
    "RESOURCE_EXHAUSTED": ResourceExhaustedError,
    "FAILED_PRECONDITION": SigError,
    "DEADLINE_EXCEEDED": DeadlineExceededError,
}


def _error_info(details: bytes):
    """The code, reason and metadata of a serialized google.rpc.Status
    (grpc-status-details-bin), or ("", "", {})."""
    if not details:
        return "", "", {}
    try:
        from google.rpc import error_details_pb2, status_pb2

        st = status_pb2.Status.FromString(details)
    except Exception:  # not a Status: no detail to use
        return "", "", {}
    code = grpc.StatusCode.UNKNOWN.name
    for c in grpc.StatusCode:
        if c.value[0] == st.code:
            code = c.name
    for d in st.details:
        info = error_details_pb2.ErrorInfo()
        if d.Is(info.DESCRIPTOR) and d.Unpack(info) and info.domain == ERROR_DOMAIN:
            return code, info.reason, dict(info.metadata)
    return code, "", {}


_FLIGHT_MESSAGE = re.compile(r"(?:Flight|gRPC) returned (.+?) error, with message: (.*)", re.S)
# gRPC's debug context, which pyarrow appends, has the status code itself.
_GRPC_STATUS = re.compile(r"grpc_status:(\d+)")
# The phrases Arrow's gRPC transport writes for a code, where they are not
# the code's name in lower case with spaces.
_PHRASES = {"unauthorized": "PERMISSION_DENIED", "timed out": "DEADLINE_EXCEEDED", "cancelled": "CANCELLED"}


def _server_message(msg: str) -> tuple[str, str]:
    """The code and the server's own message in a pyarrow.flight error's
    text, which wraps it as "Flight returned <code> error, with message:
    <message>" (or "gRPC returned ..." for codes Flight has no class of, such
    as DATA_LOSS, raised as FlightInternalError) and may append ". Detail:
    ..." and a "gRPC client debug context" holding grpc_status, the code's
    number, which decides when present."""
    code = ""
    st = _GRPC_STATUS.search(msg)
    if st:
        code = _CODE_OF_NUMBER.get(int(st.group(1)), "")
    m = _FLIGHT_MESSAGE.search(msg)
    if m:
        if not code:
            phrase = m.group(1).strip().lower()
            code = _PHRASES.get(phrase, phrase.upper().replace(" ", "_"))
        msg = m.group(2)
    for sep in (". Detail:", ". gRPC client debug context:", "\n"):
        if sep in msg:
            msg = msg.split(sep, 1)[0]
    return code, msg


# A memo error's message names what its ErrorInfo's metadata does (the
# reader's memoError): `memo pending: input "q" (component KEY) of block ID: ...`.
_MEMO_MESSAGE = re.compile(r'memo (?:pending|failed): input "([^"]*)" \(component (\S+)\) of block ([^\s:]+)')


def _classify(message: str, code: str, reason: str, metadata: dict) -> SigError:
    if not metadata:
        m = _MEMO_MESSAGE.search(message)
        if m:
            # The transport lost the details (pyarrow.flight hands no
            # status details over): the message has the same names.
            metadata = {"input": m.group(1), "component": m.group(2), "block": m.group(3)}
    if reason in _REASONS:
        cls = _REASONS[reason]
    elif "memo pending: " in message:
        cls = MemoPendingError
    elif "memo failed: " in message:
        cls = MemoFailedError
    else:
        cls = _CODES.get(code, SigError)
    return cls(message, code=code, reason=reason, metadata=metadata)


_CODE_NAMES = {c.name for c in grpc.StatusCode}
_CODE_OF_NUMBER = {c.value[0]: c.name for c in grpc.StatusCode}

# pyarrow.flight's classes for the gRPC codes that reach it without a detail.
_FLIGHT_CODES = [
    (flight.FlightUnauthenticatedError, "UNAUTHENTICATED"),
    (flight.FlightUnauthorizedError, "PERMISSION_DENIED"),
    (flight.FlightUnavailableError, "UNAVAILABLE"),
    (flight.FlightTimedOutError, "DEADLINE_EXCEEDED"),
    (flight.FlightCancelledError, "CANCELLED"),
    (flight.FlightInternalError, "INTERNAL"),
]


def from_flight(err: Exception) -> SigError:
    """The SigError of an exception pyarrow.flight raised for a reader call."""
    phrase_code, message = _server_message(str(err))
    # pyarrow 17 leaves extra_info empty; a later one may carry gRPC's
    # status details there.
    code, reason, md = _error_info(getattr(err, "extra_info", b"") or b"")
    code = code or (phrase_code if phrase_code in _CODE_NAMES else "")
    if not code:
        for cls, c in _FLIGHT_CODES:
            if isinstance(err, cls):
                code = c
                break
        else:
            if isinstance(err, NotImplementedError):
                code = "UNIMPLEMENTED"
            elif isinstance(err, KeyError):
                code = "NOT_FOUND"
            elif isinstance(err, (ValueError,)) or type(err).__name__ == "ArrowInvalid":
                code = "INVALID_ARGUMENT"
    out = _classify(message, code, reason, md)
    if code == "INTERNAL" and reason == "":
        # gRPC reports a stream reset by a dying reader so (the Go client
        # retries it too); pyarrow raises FlightInternalError for DATA_LOSS
        # as well, which its grpc_status tells apart (above).
        out = UnavailableError(message, code=code)
    return out


def from_grpc(err: grpc.RpcError) -> SigError:
    """The SigError of a failed sigd call."""
    code = err.code().name if callable(getattr(err, "code", None)) else ""
    message = err.details() if callable(getattr(err, "details", None)) else str(err)
    reason, md = "", {}
    trailers = err.trailing_metadata() if callable(getattr(err, "trailing_metadata", None)) else None
    for k, v in trailers or ():
        if k == "grpc-status-details-bin":
            _, reason, md = _error_info(v)
    return _classify(message or "", code, reason, md)
