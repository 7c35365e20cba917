package trainer

import (
	"math"
	"strings"
	"testing"

	"github.com/sigdata/sig/transform"
)

// TestControllerRefusesRangeOutsideEventTime: a job whose event range
// reaches outside the event times SIG stores is refused before it dials
// sigd, naming the bound; the widest valid range is accepted.
func TestControllerRefusesRangeOutsideEventTime(t *testing.T) {
	for _, tc := range []struct {
		from, to int64
		want     string
	}{
		{math.MinInt64, 0, "event range start: event time -9223372036854775808 is before 1970-01-01T00:00:00Z"},
		{-1, 10, "event range start"},
		{0, math.MaxInt64, "event range end 9223372036854775807 is past 10000-01-01T00:00:00Z"},
		{0, transform.EndEventTime + 1, "event range end"},
		{transform.EndEventTime, 0, "is not before 10000-01-01T00:00:00Z"},
	} {
		_, err := NewController(ControllerConfig{Client: "c", Pipeline: "p", SigdAddr: "127.0.0.1:1", From: tc.from, To: tc.to})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("range [%d, %d): %v, want an error with %q", tc.from, tc.to, err, tc.want)
		}
	}
	_, err := NewController(ControllerConfig{Client: "c", Pipeline: "p", SigdAddr: "127.0.0.1:1", From: transform.MinEventTime, To: transform.EndEventTime})
	if err != nil && strings.Contains(err.Error(), "event") {
		t.Errorf("the widest valid range: %v", err)
	}
}
