package matching

import (
	"testing"
	"time"

	"github.com/sigdata/sig/canon"
)

// TestNeedsTouchForgetsOldEntries: a component requested again within
// TouchGranularity is not rewritten, one requested later is; and what
// needsTouch remembers stays bounded by the components requested lately,
// not every component ever requested.
func TestNeedsTouchForgetsOldEntries(t *testing.T) {
	c := &Cache{}
	t0 := time.Unix(1_700_000_000, 0)
	key := func(i int) canon.Key {
		var k canon.Key
		k[0], k[1], k[2] = byte(i), byte(i>>8), byte(i>>16)
		return k
	}
	if !c.needsTouch(key(1), t0) || c.needsTouch(key(1), t0.Add(TouchGranularity/2)) {
		t.Fatal("a repeat within the granularity must not be written, the first request must")
	}
	if !c.needsTouch(key(1), t0.Add(TouchGranularity)) {
		t.Fatal("a request a granularity later must be written")
	}
	// Many components, each requested once, a second apart in batches of
	// 500: the map never holds more than twice the last batches' worth.
	const batch, rounds = 500, 200
	most := 0
	for r := range rounds {
		at := t0.Add(time.Duration(r+2) * TouchGranularity)
		for i := range batch {
			if !c.needsTouch(key(2+r*batch+i), at) {
				t.Fatalf("round %d: a component never requested was not written", r)
			}
		}
		most = max(most, len(c.touched))
	}
	if limit := 2*max(minTouchSweep, 2*batch) + batch; most > limit {
		t.Errorf("touched grew to %d entries after %d distinct components, want at most %d", most, rounds*batch, limit)
	}

	// A burst of distinct components within one granularity, then a
	// trickle: the burst's entries go once touchSweepEvery has passed.
	at := t0.Add(time.Hour)
	const burst = 20_000
	for i := range burst {
		c.needsTouch(key(1_000_000+i), at)
	}
	if len(c.touched) < burst {
		t.Fatalf("%d entries after a burst of %d in one granularity", len(c.touched), burst)
	}
	for s := range 2 * int(touchSweepEvery/TouchGranularity) {
		c.needsTouch(key(2_000_000+s), at.Add(time.Duration(s+1)*TouchGranularity))
	}
	if len(c.touched) > minTouchSweep {
		t.Errorf("%d entries left a while after the burst, want at most %d", len(c.touched), minTouchSweep)
	}
}
