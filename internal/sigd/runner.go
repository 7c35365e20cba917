package sigd

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/sigdata/sig/matching"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/catalog"
	"github.com/sigdata/sig/warehouse/objstore"
)

// MemoColumn is the name of the memoized column in a memo object; the
// object also holds event_id, row-aligned with the raw block.
const MemoColumn = "value"

// Completion is what a finished memoization task announces.
type Completion struct {
	Component matching.Key
	Block     string
	Source    string
	Object    string
	Rows      int64
	Bytes     int64
}

// Publisher announces completions (Kafka sig.memo.ready).
type Publisher interface {
	Publish(ctx context.Context, c Completion) error
}

// Runner memoizes one (component, block): it reads only the columns the
// component needs from the raw block, runs the component's canonical graph
// with transform, writes the memo object whole and then marks it ready
// (paper IV.A: SIG workers "fetch raw data, apply transformations, and store
// results back in the warehouse").
type Runner struct {
	Frontend *matching.Frontend
	Catalog  *catalog.Catalog
	Store    *objstore.Store
	Schema   func(source string) (*transform.Schema, error)
	Registry *transform.Registry
	Publish  Publisher // may be nil
}

// ErrPermanent marks failures that retrying cannot fix (a component that
// does not check, a block that is gone). Such tasks are still retried up to
// the queue's limit, then quarantined.
var ErrPermanent = errors.New("permanent")

// Run memoizes the block. It returns nil when there is nothing to do (the
// entry was evicted or is already ready).
func (r *Runner) Run(ctx context.Context, comp matching.Key, blockID string) error {
	// A memo entry can be evicted and re-created while we compute (see
	// matching.Frontend.MarkReady); then compute for the new generation.
	for attempt := 0; attempt < 3; attempt++ {
		gen, pending, err := r.Frontend.Begin(comp, blockID)
		if err != nil || !pending {
			return err
		}
		c, err := r.compute(ctx, comp, blockID)
		if err != nil {
			return err
		}
		err = r.Frontend.MarkReady(comp, blockID, gen, c.Rows, c.Bytes)
		if errors.Is(err, matching.ErrStale) {
			continue
		}
		if err != nil {
			return err
		}
		if r.Publish != nil {
			// Completion events are a hint (readers also watch the gRPC stream
			// and re-read solutions); a lost event delays, never corrupts.
			_ = r.Publish.Publish(ctx, c)
		}
		return nil
	}
	return fmt.Errorf("memo entry %s/%s kept changing while computing", comp.Short(), blockID)
}

func (r *Runner) compute(ctx context.Context, comp matching.Key, blockID string) (Completion, error) {
	rec, err := r.Frontend.Cache().Component(comp)
	if err != nil {
		return Completion{}, fmt.Errorf("%w: %v", ErrPermanent, err)
	}
	s, err := r.Schema(rec.Source)
	if err != nil {
		return Completion{}, fmt.Errorf("%w: %v", ErrPermanent, err)
	}
	reg := r.Registry
	if reg == nil {
		reg = transform.Default()
	}
	g, _, err := transform.ParseAndCheck([]byte(rec.DSL), "component "+comp.Short(), s, reg, transform.Limits{})
	if err != nil {
		return Completion{}, fmt.Errorf("%w: %v", ErrPermanent, err)
	}
	meta, err := r.Catalog.Get(rec.Source, blockID)
	if err != nil {
		return Completion{}, fmt.Errorf("%w: block %s: %v", ErrPermanent, blockID, err)
	}
	raw, err := block.ReadColumns(ctx, r.Store, meta, rec.Columns)
	if err != nil {
		return Completion{}, err
	}
	defer raw.Release()
	if err := transform.CheckRecord(g, s, raw); err != nil {
		return Completion{}, fmt.Errorf("%w: block %s: %v", ErrPermanent, blockID, err)
	}
	out, err := transform.Run(g, reg, raw, g.Inputs[0].Node)
	if err != nil {
		return Completion{}, err
	}
	defer out[0].Release()
	memo := MemoRecord(raw.Column(0), out[0])
	defer memo.Release()
	m := block.Meta{
		Key: matching.MemoObjectKey(comp, blockID), ID: blockID, Source: rec.Source, ComponentKey: comp.String(),
		WindowStart: meta.WindowStart, WindowLength: meta.WindowLength,
		MinEventTime: meta.MinEventTime, MaxEventTime: meta.MaxEventTime,
		SchemaFingerprint: meta.SchemaFingerprint, Late: meta.Late, Generation: meta.Generation,
	}
	written, err := block.Write(ctx, r.Store, m, memo)
	if err != nil {
		return Completion{}, err
	}
	return Completion{Component: comp, Block: blockID, Source: rec.Source, Object: m.Key, Rows: written.Rows, Bytes: written.Size}, nil
}

// MemoRecord is the record stored in a memo object: event_id and the
// component's output column.
func MemoRecord(eventID, value arrow.Array) arrow.Record {
	s := arrow.NewSchema([]arrow.Field{
		{Name: transform.ColEventID, Type: arrow.PrimitiveTypes.Int64},
		{Name: MemoColumn, Type: value.DataType(), Nullable: true},
	}, nil)
	return array.NewRecord(s, []arrow.Array{eventID, value}, int64(value.Len()))
}
