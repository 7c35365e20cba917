package matching

import (
	"encoding/json"
	"time"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/pebbleutil"
)

// The audit log of evictions (prefix a), newest first.

// AuditEntry records one eviction: who, when, what, why, and its impact.
type AuditEntry struct {
	ID         string      `json:"id"`
	Who        string      `json:"who"`
	When       time.Time   `json:"when"`
	What       string      `json:"what"`
	Why        string      `json:"why"`
	Components []canon.Key `json:"components"`
	Pipelines  []string    `json:"pipelines"`
	Blocks     int         `json:"blocks"`
	Bytes      int64       `json:"bytes"`
	Objects    int         `json:"objects"`
}

// AppendAudit stores an audit entry; entries list newest first.
func (c *Cache) AppendAudit(e AuditEntry) error {
	v, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return c.db.Set(auditKey(e.When, e.ID), v, c.wopts())
}

// Audit returns up to limit audit entries, newest first.
func (c *Cache) Audit(limit int) ([]AuditEntry, error) {
	var out []AuditEntry
	err := pebbleutil.Scan(c.db, auditPrefix, func(_, v []byte) (bool, error) {
		var e AuditEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return false, err
		}
		out = append(out, e)
		return limit <= 0 || len(out) < limit, nil
	})
	return out, err
}
