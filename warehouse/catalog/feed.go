package catalog

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sigdata/sig/warehouse/block"
)

// The change feed (issue 26; doc.go, "The change feed"). Followers keep
// their positions here, beside the sequence they count in, like Kafka's
// committed offsets beside its log: a Rebuild starts the sequence over and
// drops them, so a follower of a rebuilt catalog starts from its beginning
// rather than skip the versions numbered below a position of the old one.

var keyIndexed = []byte("sig.catalog.seqindex")

func seqKey(seq int64) []byte { return binary.BigEndian.AppendUint64([]byte("q\x00"), uint64(seq)) }

var seqIndexSpan = [2][]byte{[]byte("q\x00"), []byte("q\x01")}

// seqRef is a q\x00 index value: the block's <source>\x00<id>, the rest of
// its b\x00 key.
func seqRef(source, id string) []byte { return []byte(source + "\x00" + id) }

func positionKey(name string) []byte { return []byte("f\x00" + name) }

// indexBySeq builds the q\x00 index of a catalog whose index does not
// account for every sequence number handed out: one written before the
// index, or written since by a binary that did not keep it (its Commits
// moved sig.catalog.seq and not sig.catalog.seqindex). It rebuilds the
// whole index from the b\x00 entries in one batch, so running it again,
// after a crash or not, gives the same index. Blocks catalogued before
// versions (Seq 0) are in every snapshot and in no feed: they get no entry.
func (c *Catalog) indexBySeq() error {
	seq, err := c.seq()
	if err != nil {
		return err
	}
	indexed, err := c.uint64Key(keyIndexed)
	if err != nil || indexed >= seq {
		return err
	}
	it, err := c.db.NewIter(&pebble.IterOptions{LowerBound: []byte("b\x00"), UpperBound: []byte("b\x01")})
	if err != nil {
		return err
	}
	defer it.Close()
	b := c.db.NewBatch()
	defer b.Close()
	b.DeleteRange(seqIndexSpan[0], seqIndexSpan[1], nil)
	for ok := it.First(); ok; ok = it.Next() {
		// Only the sequence number: a full decode of every block is
		// what the index spares its readers.
		var m struct {
			Seq int64 `json:"seq"`
		}
		if err := json.Unmarshal(it.Value(), &m); err != nil {
			return fmt.Errorf("catalog: indexing %q: %w", it.Key(), err)
		}
		if m.Seq >= 1 {
			b.Set(seqKey(m.Seq), bytes.Clone(it.Key()[2:]), nil)
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	b.Set(keyIndexed, binary.BigEndian.AppendUint64(nil, uint64(seq)), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("catalog: indexing by sequence number: %w", err)
	}
	return nil
}

// uint64Key reads a big-endian counter (0 when absent).
func (c *Catalog) uint64Key(k []byte) (int64, error) {
	v, closer, err := c.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("catalog: %w", err)
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("catalog: %s: value of %d bytes", k, len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// ChangedSince returns the blocks whose newest version was catalogued after
// snapshot after, each at that version, in sequence order, at most limit of
// them (limit <= 0: all), and the position to continue from: pass it as
// after to get the changes that follow. When it returns fewer than limit,
// next is the current snapshot, so a follower that stores it skips what
// needs no look (sequence numbers of superseded versions, of blocks
// removed).
//
// A block changed twice since after is returned once, at its newest
// version, in that version's place: a follower sees every block's current
// state exactly once per change it has not seen, never a version that was
// already superseded (those are for snapshot readers: RangeAt, GetAt).
// It reads one consistent view, and costs a seek and a lookup per block
// returned, whatever the number of blocks catalogued.
func (c *Catalog) ChangedSince(after int64, limit int) (ms []block.Meta, next int64, err error) {
	after = max(after, 0)
	snap := c.db.NewSnapshot()
	defer snap.Close()
	last := int64(1) // a catalog's first sequence number (Open)
	if v, closer, err := snap.Get(keySeq); err == nil {
		if len(v) == 8 {
			last = int64(binary.BigEndian.Uint64(v))
		}
		closer.Close()
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return nil, after, fmt.Errorf("catalog: %w", err)
	}
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: seqKey(after + 1), UpperBound: seqIndexSpan[1]})
	if err != nil {
		return nil, after, err
	}
	defer it.Close()
	next = after
	for ok := it.First(); ok; ok = it.Next() {
		if limit > 0 && len(ms) == limit {
			return ms, next, nil
		}
		seq := int64(binary.BigEndian.Uint64(it.Key()[2:]))
		v, closer, err := snap.Get(append([]byte("b\x00"), it.Value()...))
		if errors.Is(err, pebble.ErrNotFound) {
			next = seq // a block removed without its entry: nothing to follow
			continue
		}
		if err != nil {
			return ms, next, fmt.Errorf("catalog: %w", err)
		}
		m, err := c.decode(v)
		closer.Close()
		if err != nil {
			return ms, next, fmt.Errorf("catalog: block %q: %w", it.Value(), err)
		}
		next = seq
		if m.Seq != seq {
			continue // superseded: its newest version has an entry of its own
		}
		ms = append(ms, m)
	}
	if err := it.Error(); err != nil {
		return ms, next, err
	}
	return ms, max(next, last), nil
}

// Position returns the position follower name stored (SetPosition), 0 if
// it has none.
func (c *Catalog) Position(name string) (int64, error) {
	if err := block.ValidateName("follower name", name); err != nil {
		return 0, fmt.Errorf("catalog: %w", err)
	}
	return c.uint64Key(positionKey(name))
}

// SetPosition durably records that follower name has followed the changes
// up to snapshot seq (ChangedSince's next), so that it resumes from there
// after a restart. A follower stores it after it has acted on those
// changes: a crash in between makes it act on them again, never skip them.
func (c *Catalog) SetPosition(name string, seq int64) error {
	if err := block.ValidateName("follower name", name); err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, err := c.seq()
	if err != nil {
		return err
	}
	if seq < 0 || seq > cur {
		return fmt.Errorf("catalog: position of %s: snapshot %d is not in [0, %d] (the current snapshot)", name, seq, cur)
	}
	if err := c.db.Set(positionKey(name), binary.BigEndian.AppendUint64(nil, uint64(seq)), pebble.Sync); err != nil {
		return fmt.Errorf("catalog: position of %s: %w", name, err)
	}
	return nil
}
