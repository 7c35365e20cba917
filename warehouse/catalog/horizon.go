package catalog

import "time"

// Horizon is version GC's grace period as a snapshot: the GCUpTo horizon
// that keeps every version superseded less than Grace ago, so a reader that
// resolved a block a moment ago without a pin still finds the version it
// resolved. The catalog records no time of its own, so the horizon is the
// newest snapshot a collector took at least Grace ago: each GC round takes
// the current snapshot and passes it, with the round's time, to Advance.
//
// It is pure (time is passed in, nothing is read or written) and owned by
// one collector at a time: ingestion (warehouse/ingest) and sigd's version
// GC (package versions) each keep one. A zero Horizon has no grace.
type Horizon struct {
	// Grace is how long a superseded version is kept at least. Zero or
	// negative: none, the horizon is the snapshot taken now.
	Grace time.Duration

	taken   []takenSnapshot // snapshots younger than Grace, oldest first
	horizon int64
}

type takenSnapshot struct {
	at   time.Time
	snap int64
}

// Advance records that snapshot snap was taken at now and returns the
// horizon: the newest snapshot recorded at least Grace before now (0, which
// keeps every superseded version, until one is). Calls pass non-decreasing
// times and snapshots.
func (h *Horizon) Advance(now time.Time, snap int64) int64 {
	h.taken = append(h.taken, takenSnapshot{now, snap})
	grace := max(h.Grace, 0)
	for len(h.taken) > 0 && now.Sub(h.taken[0].at) >= grace {
		h.horizon = h.taken[0].snap
		h.taken = h.taken[1:]
	}
	return h.horizon
}
