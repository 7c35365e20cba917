package block_test

import (
	"testing"
	"time"

	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
)

// TestWindowPrefixOrder: window prefixes (and so block ids) sort in time
// order across the whole range of event times SIG stores, and the bounds
// are the instants the documentation names.
func TestWindowPrefixOrder(t *testing.T) {
	if got := time.UnixMicro(transform.EndEventTime).UTC(); !got.Equal(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("EndEventTime is %v", got)
	}
	if got := time.UnixMicro(transform.MinEventTime).UTC(); !got.Equal(time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("MinEventTime is %v", got)
	}
	times := []int64{transform.MinEventTime, 1, 999_999_999_999_999, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro(),
		time.Date(9999, 12, 31, 23, 0, 0, 0, time.UTC).UnixMicro(), transform.EndEventTime - 1}
	for i := 1; i < len(times); i++ {
		a, b := block.WindowPrefix(times[i-1]), block.WindowPrefix(times[i])
		if a > b {
			t.Errorf("WindowPrefix(%d) = %s sorts after WindowPrefix(%d) = %s", times[i-1], a, times[i], b)
		}
	}
	for _, bad := range []int64{transform.MinEventTime - 1, transform.EndEventTime} {
		if transform.CheckEventTime(bad) == nil {
			t.Errorf("CheckEventTime(%d) accepted it", bad)
		}
	}
	for _, good := range times {
		if err := transform.CheckEventTime(good); err != nil {
			t.Errorf("CheckEventTime(%d): %v", good, err)
		}
	}
}
