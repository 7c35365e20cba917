package matching

import (
	"encoding/json"
	"errors"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/pebbleutil"
)

// The insertion policy's statistics (issue 20): what workers measured, kept
// in the cache so that every sigd decision uses them and they survive
// restarts. Sums, halved when they pass statsHalveRows rows, so that old
// measurements fade as new ones come.

// OpStat is the measured cost of an op class (insertion.OpClass): CPU
// nanoseconds spent in its kernel over rows.
type OpStat struct {
	Nanos int64 `json:"nanos"`
	Rows  int64 `json:"rows"`
}

// NsPerRow is the mean cost per row, 0 when unmeasured.
func (s OpStat) NsPerRow() float64 {
	if s.Rows <= 0 {
		return 0
	}
	return float64(s.Nanos) / float64(s.Rows)
}

// SizeStat is the measured size of a memo node's objects: bytes over rows.
type SizeStat struct {
	Bytes int64 `json:"bytes"`
	Rows  int64 `json:"rows"`
}

// BytesPerRow is the mean size per row, 0 when unmeasured.
func (s SizeStat) BytesPerRow() float64 {
	if s.Rows <= 0 {
		return 0
	}
	return float64(s.Bytes) / float64(s.Rows)
}

const statsHalveRows = 1 << 30

// CostStats are the measured statistics a submit's decisions read.
type CostStats struct {
	Ops   map[string]OpStat
	Nodes map[canon.Key]SizeStat
}

// CostStats returns every op's statistics and, for the given node keys,
// their sizes (measured nodes only).
func (c *Cache) CostStats(nodes ...canon.Key) (CostStats, error) {
	st := CostStats{Ops: map[string]OpStat{}, Nodes: map[canon.Key]SizeStat{}}
	err := pebbleutil.Scan(c.db, opStatsPrefix, func(k, v []byte) (bool, error) {
		var s OpStat
		if err := json.Unmarshal(v, &s); err != nil {
			return false, err
		}
		st.Ops[string(k[len(opStatsPrefix):])] = s
		return true, nil
	})
	if err != nil {
		return st, err
	}
	for _, n := range nodes {
		v, ok, err := pebbleutil.Get(c.db, sizeStatKey(n))
		if err != nil {
			return st, err
		}
		if !ok {
			continue
		}
		var s SizeStat
		if err := json.Unmarshal(v, &s); err != nil {
			return st, err
		}
		st.Nodes[n] = s
	}
	return st, nil
}

// AddOpStats adds a task's measurements to the ops' statistics.
func (c *Cache) AddOpStats(ops map[string]OpStat) error {
	if len(ops) == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.db.NewBatch()
	defer b.Close()
	for class, add := range ops {
		if class == "" || add.Rows <= 0 || add.Nanos < 0 {
			continue
		}
		var s OpStat
		if err := c.getJSON(opStatKey(class), &s); err != nil {
			return err
		}
		s.Nanos += add.Nanos
		s.Rows += add.Rows
		for s.Rows > statsHalveRows {
			s.Nanos, s.Rows = s.Nanos/2, s.Rows/2
		}
		v, _ := json.Marshal(s)
		if err := b.Set(opStatKey(class), v, nil); err != nil {
			return err
		}
	}
	return b.Commit(c.wopts())
}

// AddSize adds a memo object's size to its node's statistics.
func (c *Cache) AddSize(k canon.Key, bytes, rows int64) error {
	if rows <= 0 || bytes < 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var s SizeStat
	if err := c.getJSON(sizeStatKey(k), &s); err != nil {
		return err
	}
	s.Bytes += bytes
	s.Rows += rows
	for s.Rows > statsHalveRows {
		s.Bytes, s.Rows = s.Bytes/2, s.Rows/2
	}
	v, _ := json.Marshal(s)
	return c.db.Set(sizeStatKey(k), v, c.wopts())
}

// getJSON decodes the value at key into v, leaving v as it is when there
// is none.
func (c *Cache) getJSON(key []byte, v any) error {
	b, ok, err := pebbleutil.Get(c.db, key)
	if err != nil || !ok {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errors.Join(errors.New("matching: corrupt statistics record"), err)
	}
	return nil
}
