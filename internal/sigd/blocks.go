package sigd

import (
	"github.com/sigdata/sig/matching"
	"github.com/sigdata/sig/warehouse/catalog"
)

// catalogBlocks lists raw blocks for the matching frontend from the
// warehouse catalog.
type catalogBlocks struct{ cat *catalog.Catalog }

func (c catalogBlocks) Range(source string, from, to int64) ([]matching.Block, error) {
	metas, err := c.cat.Range(source, from, to)
	if err != nil {
		return nil, err
	}
	out := make([]matching.Block, len(metas))
	for i, m := range metas {
		out[i] = matching.Block{ID: m.ID, RawObject: m.Key, MinEvent: m.MinEventTime, MaxEvent: m.MaxEventTime, Rows: m.Rows}
	}
	return out, nil
}
