package matching

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sigdata/sig/transform"
)

// Requests the frontend refuses: an InputError names the field that is
// wrong, and the gRPC layer answers InvalidArgument with it. The checks of
// names, priorities and event ranges are shared by submit, read solutions
// and sigd's other RPCs.

// InputError is a request the frontend refuses; Field names what is wrong
// (the gRPC layer answers InvalidArgument with it).
type InputError struct {
	Field string
	Err   error
}

func (e *InputError) Error() string { return e.Field + ": " + e.Err.Error() }

func (e *InputError) Unwrap() error { return e.Err }

func inputErr(field string, format string, args ...any) error {
	return &InputError{Field: field, Err: fmt.Errorf(format, args...)}
}

// checkRange checks a read range [from, to): not empty, and within the
// event times SIG stores. A range reaching past them is refused rather than
// clamped: it is a client's bug (a sentinel such as MinInt64, a time in the
// wrong unit), and a solution for a range other than the one asked for
// would be echoed back as if it were that one.
func checkRange(from, to int64) error {
	switch {
	case from >= to:
		return inputErr("range", "empty event range [%d, %d): start must be before end", from, to)
	case from < transform.MinEventTime:
		return inputErr("range.start_micros", "%d is before %s, the earliest event time SIG stores (event times are microseconds since the Unix epoch)",
			from, transform.FormatMicros(transform.MinEventTime))
	case to > transform.EndEventTime:
		return inputErr("range.end_micros", "%d is past %s (%d), the end of the event times SIG stores (event times are microseconds since the Unix epoch)",
			to, transform.FormatMicros(transform.EndEventTime), transform.EndEventTime)
	}
	return nil
}

// Priorities are in [0, MaxPriority]; higher runs first.
const MaxPriority = 1000

// CheckPriority checks a pipeline's priority (at submit and when it is
// changed).
func CheckPriority(p int32) error {
	if p < 0 || p > MaxPriority {
		return inputErr("priority", "%d is out of range [0, %d]", p, MaxPriority)
	}
	return nil
}

// ValidateName checks a client, pipeline or input name: 1 to 128 bytes of
// letters, digits, '.', '_' and '-'. Any other byte (in particular control
// bytes, '/', and HTML) is refused so names are safe in keys, object paths,
// logs and the web UI.
func ValidateName(field, s string) error {
	if s == "" || len(s) > 128 {
		return inputErr(field, "must be 1 to 128 characters, got %d", len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '.' || c == '_' || c == '-' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') {
			continue
		}
		return inputErr(field, "character %q at byte %d is not allowed (letters, digits, '.', '_', '-')", c, i)
	}
	return nil
}

// ValidatePipelineName checks a pipeline name: 1 to 128 bytes of valid
// UTF-8 without control characters. Pipeline names are free text chosen by
// model owners, so every place that shows one escapes it (the web UI) and
// every place that puts one in an object key escapes it (checkpoints).
func ValidatePipelineName(field, s string) error {
	if s == "" || len(s) > 128 {
		return inputErr(field, "must be 1 to 128 bytes, got %d", len(s))
	}
	if !utf8.ValidString(s) {
		return inputErr(field, "is not valid UTF-8")
	}
	for i, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return inputErr(field, "control character %U at byte %d is not allowed", r, i)
		}
	}
	return nil
}

// ClipText returns free text a caller sent (a reason, a report's detail)
// as sigd keeps and shows it: cut to at most n bytes at a rune boundary,
// invalid UTF-8 and control characters replaced by spaces, rather than
// refused.
func ClipText(s string, n int) string {
	var b strings.Builder
	for _, r := range s {
		if r == utf8.RuneError || r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			r = ' '
		}
		if b.Len()+utf8.RuneLen(r) > n {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}
