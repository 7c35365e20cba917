package matching

import (
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/pebbleutil"
)

// Last-requested times (prefix r): when each component was last submitted
// or read. Eviction orders components by them (package eviction). A
// component's time is written at most once per TouchGranularity, so
// repeated requests of a cached graph write nothing.

// TouchGranularity is the resolution of last-requested times: eviction
// policies work in minutes, so a second is plenty.
const TouchGranularity = time.Second

// LastRequested returns when the component was last requested.
func (c *Cache) LastRequested(k canon.Key) (time.Time, error) {
	v, ok, err := pebbleutil.Get(c.db, requestedKey(k))
	if err != nil || !ok {
		return time.Time{}, err
	}
	t, _ := decodeRequested(v)
	return t, nil
}

// Touch records that the components were requested at the given time.
func (c *Cache) Touch(keys []canon.Key, at time.Time) error {
	b := c.db.NewBatch()
	defer b.Close()
	for _, k := range keys {
		if err := c.setRequested(b, k, at); err != nil {
			return err
		}
	}
	if b.Empty() {
		return nil
	}
	return b.Commit(c.wopts())
}

// setRequested adds k's last-requested time to b, unless it was written
// less than TouchGranularity ago (needsTouch).
func (c *Cache) setRequested(b *pebble.Batch, k canon.Key, at time.Time) error {
	if !c.needsTouch(k, at) {
		return nil
	}
	return b.Set(requestedKey(k), encodeRequested(at), nil)
}

// touchSweepEvery bounds how long needsTouch keeps entries it no longer
// needs while it is past minTouchSweep.
const touchSweepEvery = 10 * TouchGranularity

const minTouchSweep = 1024

// needsTouch reports whether k's last-requested time must be written for a
// request at t, and records that it will be.
func (c *Cache) needsTouch(k canon.Key, t time.Time) bool {
	c.touchMu.Lock()
	defer c.touchMu.Unlock()
	if c.touched == nil {
		c.touched = map[canon.Key]time.Time{}
	}
	if last, ok := c.touched[k]; ok && t.Sub(last) < TouchGranularity {
		return false
	}
	if n := len(c.touched); n >= c.sweepAt || n > minTouchSweep && t.Sub(c.lastSweep) >= touchSweepEvery {
		c.lastSweep = t
		for key, last := range c.touched {
			if t.Sub(last) >= TouchGranularity {
				delete(c.touched, key)
			}
		}
		c.sweepAt = max(2*len(c.touched), minTouchSweep)
	}
	c.touched[k] = t
	return true
}
