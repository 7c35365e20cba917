package sigd

import (
	"math"
	"testing"
	"time"
)

// TestGCHorizon: version GC's horizon is the newest snapshot it took at
// least the grace period ago, so a version superseded within the grace
// period is kept (a reader may have resolved it without a pin); no grace
// collects up to now.
func TestGCHorizon(t *testing.T) {
	var g gcHorizons
	t0 := time.Unix(1_700_000_000, 0)
	grace := 10 * time.Minute
	for _, c := range []struct {
		after time.Duration
		snap  int64
		want  int64
	}{
		{0, 5, 0},                 // nothing is grace old yet: nothing collectable
		{time.Minute, 7, 0},       //
		{10 * time.Minute, 9, 5},  // the snapshot of t0 is 10 minutes old
		{12 * time.Minute, 12, 7}, // and that of t0+1m
		{30 * time.Minute, 20, 12},
	} {
		if got := g.advance(t0.Add(c.after), c.snap, grace); got != c.want {
			t.Fatalf("at +%v (snapshot %d): horizon %d, want %d", c.after, c.snap, got, c.want)
		}
	}
	if got := g.advance(t0.Add(time.Hour), 30, -1); got != math.MaxInt64 {
		t.Fatalf("without grace: horizon %d, want every snapshot", got)
	}
}
