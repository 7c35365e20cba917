package reader

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/canon"
)

// Sentinel errors. The server's errors wrap them; Status maps them to gRPC
// codes, and the Client's errors carry the gRPC status, so callers on either
// side branch with errors.Is or IsMemoPending.
var (
	// ErrMemoPending: a MEMO input's data is not there yet (its state is not
	// READY, or its object is missing, e.g. evicted and being recomputed).
	// Retryable: the memo object appears when its task completes (brief,
	// "Training holds": a transient stall lifted by completion events).
	ErrMemoPending = errors.New("memo pending")
	// ErrMemoFailed: a MEMO input's memoization task was quarantined. Not
	// retryable until an operator releases it; the input can be read LOCAL.
	ErrMemoFailed = errors.New("memo failed")
	// ErrCorrupt: an object's bytes are not a valid block, or a memo object
	// does not belong to (or is not row-aligned with) the unit's raw block.
	ErrCorrupt = errors.New("corrupt")
	// ErrInvalidUnit: the work unit is malformed.
	ErrInvalidUnit = errors.New("invalid work unit")
	// ErrNoBlock: the raw block does not exist.
	ErrNoBlock = errors.New("raw block not found")
	// ErrStore: the object store failed after its own retries (transient).
	ErrStore = errors.New("object store unavailable")
)

// ErrorDomain and the reasons below are the google.rpc.ErrorInfo detail
// attached to every status the server returns, so clients in any language
// can tell a pending memo from a dead reader without parsing messages.
const (
	ErrorDomain        = "reader.sig"
	ReasonMemoPending  = "MEMO_PENDING"
	ReasonMemoFailed   = "MEMO_FAILED"
	ReasonCorrupt      = "CORRUPT"
	ReasonInvalidUnit  = "INVALID_UNIT"
	ReasonNoBlock      = "NO_BLOCK"
	ReasonStore        = "STORE_UNAVAILABLE"
	ReasonCompute      = "COMPUTE_FAILED"
	pendingPrefix      = "memo pending: "
	failedPrefix       = "memo failed: "
	invalidFieldPrefix = "invalid work unit: "
)

// fieldError is a malformed work unit; Field names the offending field the
// way protobuf JSON would ("inputs[2].canonical_dsl").
type fieldError struct {
	Field string
	Err   error
}

func (e *fieldError) Error() string   { return invalidFieldPrefix + e.Field + ": " + e.Err.Error() }
func (e *fieldError) Unwrap() []error { return []error{ErrInvalidUnit, e.Err} }

func invalid(field, format string, args ...any) error {
	return &fieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

// memoError is a MEMO input that cannot be read yet (pending) or at all
// (failed); it names the input, the component and the block.
type memoError struct {
	Kind      error // ErrMemoPending or ErrMemoFailed
	Input     string
	Component canon.Key
	Block     string
	Detail    string
}

func (e *memoError) Error() string {
	prefix := pendingPrefix
	if e.Kind == ErrMemoFailed {
		prefix = failedPrefix
	}
	return fmt.Sprintf("%sinput %q (component %s) of block %s: %s", prefix, e.Input, e.Component, e.Block, e.Detail)
}
func (e *memoError) Unwrap() error { return e.Kind }

// Status converts an error of Server.Read into the gRPC status the service
// returns: memo pending → Unavailable, memo failed → FailedPrecondition,
// corrupt → DataLoss (a memo mismatch of the guard too, reason
// MEMO_MISMATCH), invalid unit → InvalidArgument, missing raw block →
// NotFound, object store down → Unavailable. Errors that already carry a
// status keep it. Each status has an ErrorInfo detail naming the reason.
func Status(err error) *status.Status {
	if err == nil {
		return status.New(codes.OK, "")
	}
	if s, ok := status.FromError(err); ok && s.Code() != codes.Unknown {
		return s
	}
	code, reason := codes.Internal, ""
	md := map[string]string{}
	var me *memoError
	var fe *fieldError
	var mm *mismatchError
	switch {
	case errors.As(err, &mm):
		code, reason = codes.DataLoss, ReasonMemoMismatch
		md["input"], md["component"], md["block"] = mm.Input, mm.Component.String(), mm.Block
		md["row"], md["event_id"] = strconv.FormatInt(mm.Row, 10), strconv.FormatInt(mm.EventID, 10)
		md["guard_seed"] = fmt.Sprintf("%#016x", mm.Seed) // GuardSample replays the rows checked
	case errors.As(err, &me):
		code, reason = codes.Unavailable, ReasonMemoPending
		if me.Kind == ErrMemoFailed {
			code, reason = codes.FailedPrecondition, ReasonMemoFailed
		}
		md["input"], md["component"], md["block"] = me.Input, me.Component.String(), me.Block
	case errors.As(err, &fe):
		code, reason = codes.InvalidArgument, ReasonInvalidUnit
		md["field"] = fe.Field
	case errors.Is(err, ErrCorrupt):
		code, reason = codes.DataLoss, ReasonCorrupt
	case errors.Is(err, ErrNoBlock):
		code, reason = codes.NotFound, ReasonNoBlock
	case errors.Is(err, ErrCompute):
		code, reason = codes.FailedPrecondition, ReasonCompute
	case errors.Is(err, ErrStore):
		code, reason = codes.Unavailable, ReasonStore
	case errors.Is(err, errCanceled):
		code = codes.Canceled
	}
	s := status.New(code, err.Error())
	if reason != "" {
		if d, derr := s.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain, Metadata: md}); derr == nil {
			s = d
		}
	}
	return s
}

var errCanceled = errors.New("canceled")

// reasonOf returns the ErrorInfo reason of a status from this service.
func reasonOf(s *status.Status) string {
	for _, d := range s.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == ErrorDomain {
			return info.Reason
		}
	}
	return ""
}

// IsMemoPending reports whether err (from the Client, a gRPC call or the
// Server) says that memoized data is not there yet: retry later, or read the
// input LOCAL. It recognizes the ErrorInfo detail and, for clients that lose
// details, the "memo pending:" message prefix.
func IsMemoPending(err error) bool {
	if errors.Is(err, ErrMemoPending) {
		return true
	}
	s, ok := status.FromError(err)
	if !ok || s.Code() != codes.Unavailable {
		return false
	}
	return reasonOf(s) == ReasonMemoPending || strings.HasPrefix(s.Message(), pendingPrefix)
}
