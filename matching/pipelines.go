package matching

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/pebbleutil"
)

// Registered pipelines (prefix p) and the user index (u: the pipelines
// using each component, as a model input's component or a memo node of an
// input's cover). A submit writes both in one batch, with the records of
// the components it adds and last-requested times (RegisterPipeline).

// RegisterPipeline records a submit in one batch: the records (and search
// index entries) of the components added, which the cache did not hold
// (model inputs' components and their covers' memo nodes alike); the
// last-requested time of every key p uses; p as a user of those keys and no
// longer of those only old used (old is p's previous registration, nil if
// none); and p itself unless it is old unchanged. An identical re-submit
// within TouchGranularity writes nothing.
func (c *Cache) RegisterPipeline(p *Pipeline, old *Pipeline, added []ComponentRecord, at time.Time) error {
	b := c.db.NewBatch()
	defer b.Close()
	for i := range added {
		if err := putComponent(b, &added[i]); err != nil {
			return err
		}
	}
	oldUses := map[canon.Key]bool{}
	if old != nil {
		for _, k := range old.usedKeys() {
			oldUses[k] = true
		}
	}
	seen := map[canon.Key]bool{}
	for _, k := range p.usedKeys() {
		seen[k] = true
		if err := c.setRequested(b, k, at); err != nil {
			return err
		}
		if !oldUses[k] {
			if err := b.Set(userKey(k, p.Client, p.Name), nil, nil); err != nil {
				return err
			}
		}
	}
	for k := range oldUses {
		if !seen[k] {
			if err := b.Delete(userKey(k, p.Client, p.Name), nil); err != nil {
				return err
			}
		}
	}
	pv, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if ov, err := json.Marshal(old); old == nil || err != nil || string(ov) != string(pv) {
		if err := b.Set(pipelineKey(p.Client, p.Name), pv, nil); err != nil {
			return err
		}
	}
	if b.Empty() {
		return nil
	}
	return b.Commit(c.wopts())
}

// Users returns the pipelines (client, pipeline) using a component: as a
// model input's component, or as a memo node of an input's cover.
func (c *Cache) Users(k canon.Key) ([][2]string, error) {
	var out [][2]string
	pfx := userPrefix(k)
	err := pebbleutil.Scan(c.db, pfx, func(key, _ []byte) (bool, error) {
		if client, pipeline, ok := decodeUser(key[len(pfx):]); ok {
			out = append(out, [2]string{client, pipeline})
		}
		return true, nil
	})
	return out, err
}

// Pipeline returns a registered pipeline.
func (c *Cache) Pipeline(client, name string) (Pipeline, error) {
	v, ok, err := pebbleutil.Get(c.db, pipelineKey(client, name))
	if err != nil {
		return Pipeline{}, err
	}
	if !ok {
		return Pipeline{}, fmt.Errorf("%w: pipeline %s/%s", ErrNotFound, client, name)
	}
	var p Pipeline
	if err := json.Unmarshal(v, &p); err != nil {
		return Pipeline{}, fmt.Errorf("pipeline %s/%s: corrupt record: %w", client, name, err)
	}
	return p, nil
}

// Pipelines returns every registered pipeline, of one client or of all when
// client is empty.
func (c *Cache) Pipelines(client string) ([]Pipeline, error) {
	var out []Pipeline
	err := pebbleutil.Scan(c.db, pipelinePrefix(client), func(_, v []byte) (bool, error) {
		var p Pipeline
		if err := json.Unmarshal(v, &p); err != nil {
			return false, err
		}
		out = append(out, p)
		return true, nil
	})
	return out, err
}

// SetPipelinePriority changes a registered pipeline's priority.
func (c *Cache) SetPipelinePriority(client, name string, prio int32) (Pipeline, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, err := c.Pipeline(client, name)
	if err != nil {
		return p, err
	}
	p.Priority = prio
	v, err := json.Marshal(p)
	if err != nil {
		return p, err
	}
	return p, c.db.Set(pipelineKey(client, name), v, c.wopts())
}
