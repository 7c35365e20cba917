package catalog_test

import (
	"testing"
	"time"

	"github.com/sigdata/sig/warehouse/catalog"
)

// TestHorizon: version GC's horizon is the newest snapshot taken at least
// the grace period ago, so a version superseded within the grace period is
// kept (a reader may have resolved it without a pin); no grace (zero or
// negative alike) collects up to the snapshot taken now.
func TestHorizon(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	type step struct {
		after time.Duration
		snap  int64
		want  int64
	}
	for _, c := range []struct {
		grace time.Duration
		steps []step
	}{
		{10 * time.Minute, []step{
			{0, 5, 0},                 // nothing is grace old yet: nothing collectable
			{time.Minute, 7, 0},       //
			{10 * time.Minute, 9, 5},  // the snapshot of t0 is 10 minutes old
			{12 * time.Minute, 12, 7}, // and that of t0+1m
			{30 * time.Minute, 20, 12},
			{31 * time.Minute, 20, 12}, // the snapshot of +30m is 1 minute old
		}},
		{0, []step{{0, 5, 5}, {time.Second, 9, 9}}},
		{-1, []step{{0, 5, 5}, {time.Hour, 30, 30}}},
	} {
		h := catalog.Horizon{Grace: c.grace}
		for _, s := range c.steps {
			if got := h.Advance(t0.Add(s.after), s.snap); got != s.want {
				t.Fatalf("grace %v, at +%v (snapshot %d): horizon %d, want %d", c.grace, s.after, s.snap, got, s.want)
			}
		}
	}
}
