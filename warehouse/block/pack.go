package block

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/objstore"
)

// Packed memo objects (issue 28; doc.go, "Packs"). A pack is a block
// object of the ordinary layout whose footer says Pack: event_id, encoded
// as its raw block's, then one column per member, named by the member's
// component key in hex (MemberColumn) and carrying the member's input
// version (Column.InputVersion), row-aligned with one raw block version
// (Meta.ID and Meta.Version). A reader of one member fetches its column
// by the offset the footer gives; the members of a block's tasks share one
// object, one footer and one event_id segment instead of an object each.

// MemberColumn is the name of component k's column in a pack: its key in
// hex, the key's one printed form (canon.Key.String).
func MemberColumn(k canon.Key) string { return k.String() }

// DefaultPackBytes bounds the members' column bytes in one pack (their
// Arrow buffers, before any compression): a worker holds a pack's bytes
// while it writes it, and 32 MiB keeps that within the 64 MiB encode
// buffers Write pools while holding, at the fleet's 10,000-row blocks
// (10 KB to 1 MB a column), tens to thousands of members.
const DefaultPackBytes = 32 << 20

// PackMember is one memo column to pack: component Component's output for
// memo block Block (the raw block's id at the member's input version),
// row-aligned with the pack's raw block version.
type PackMember struct {
	Component canon.Key
	Block     blockref.Memo
	Value     arrow.Array
	// Group places members that pipelines read together next to each
	// other: packs are laid out by Group, then by component key, and a
	// group goes whole into one pack unless it alone exceeds the bound.
	// The caller names it (the pipelines reading the member, say); ""
	// for every member is key order.
	Group string
}

// PackOptions are how WritePacks encodes and bounds packs.
type PackOptions struct {
	// EncodeOptions compress the members' segments. The event_id segment
	// is always encoded as the raw block's (WritePacks sets it), so that
	// the two stay byte-identical and readers prove alignment from the
	// footers (SameSegment).
	EncodeOptions
	// MaxBytes bounds the members' column bytes of one pack
	// (DefaultPackBytes when 0): members that would exceed it go into
	// another pack; a member larger than it alone is a pack of its own.
	MaxBytes int64
	// NewKey names each pack written (NewPackKey when nil; tests fix it).
	NewKey func(source string, raw blockref.Ref) string
	// Wide stores every member in its declared type. By default an int64
	// or list<int64> member is stored in the narrowest integer type that
	// holds its values (doc.go, "Narrow stored types": WritePacks names
	// every member in EncodeOptions.Narrow), which readers widen back.
	Wide bool
}

// Packed is where WritePacks put one member: its pack's key and the
// column's directory entry there.
type Packed struct {
	Component canon.Key
	Block     blockref.Memo
	Object    string
	Column    Column
}

// PlanPacks lays out members of the given column sizes and groups, already
// in their order (by group, then key), into packs of at most max bytes: a
// group that does not fit in the pack being filled starts a new one, and
// only a group larger than max is split. It returns each pack's members as
// indexes. Pure, for WritePacks and its data-driven tests.
func PlanPacks(sizes []int64, groups []string, max int64) [][]int {
	var out [][]int
	var cur []int
	var curSize int64
	flush := func() {
		if len(cur) > 0 {
			out = append(out, cur)
			cur, curSize = nil, 0
		}
	}
	for i := 0; i < len(sizes); {
		j := i
		var gsize int64
		for j < len(sizes) && groups[j] == groups[i] {
			gsize += sizes[j]
			j++
		}
		if curSize+gsize > max {
			flush()
		}
		for x := i; x < j; x++ {
			if len(cur) > 0 && curSize+sizes[x] > max {
				flush()
			}
			cur = append(cur, x)
			curSize += sizes[x]
		}
		i = j
	}
	flush()
	return out
}

// arraySize is the bytes of an array's buffers, its children's included:
// what a member adds to a pack before compression.
func arraySize(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += arraySize(c)
	}
	return n
}

// EncodePack lays out one pack at key: eventID (the raw block version
// raw's ids, row for row) and each member's column, in the order given,
// in the footer of raw's block version (its id, version, source, window,
// event-time range, schema fingerprint). It returns the object's bytes
// and completed metadata. Every member must be of raw's block at an input
// version not past raw's, row-aligned with it, and appear once.
func EncodePack(key string, raw Meta, eventID arrow.Array, members []PackMember, opts EncodeOptions) ([]byte, Meta, error) {
	meta, rec, err := packRecord(key, raw, eventID, members)
	if err != nil {
		return nil, Meta{}, err
	}
	defer rec.Release()
	return encode(meta, rec, nil, opts)
}

// packRecord is a pack's metadata (with its members' input versions) and
// record.
func packRecord(key string, raw Meta, eventID arrow.Array, members []PackMember) (Meta, arrow.Record, error) {
	if raw.IsMemo() {
		return Meta{}, nil, fmt.Errorf("block: pack %s: %s is a memo object, not a raw block", key, raw.Key)
	}
	if eventID == nil || eventID.DataType().ID() != arrow.INT64 || int64(eventID.Len()) != raw.Rows {
		return Meta{}, nil, fmt.Errorf("block: pack %s: event_id must be the raw block's %d int64 ids", key, raw.Rows)
	}
	if len(members) == 0 {
		return Meta{}, nil, fmt.Errorf("block: pack %s: no members", key)
	}
	meta := Meta{Key: key, ID: raw.ID, Version: raw.Version, Source: raw.Source, Pack: true,
		WindowStart: raw.WindowStart, WindowLength: raw.WindowLength,
		MinEventTime: raw.MinEventTime, MaxEventTime: raw.MaxEventTime,
		SchemaFingerprint: raw.SchemaFingerprint, Late: raw.Late, Generation: raw.Generation,
		Columns: []Column{{Name: transform.ColEventID}}}
	fields := []arrow.Field{{Name: transform.ColEventID, Type: arrow.PrimitiveTypes.Int64}}
	cols := []arrow.Array{eventID}
	seen := map[canon.Key]bool{}
	for _, m := range members {
		switch {
		case m.Component == (canon.Key{}):
			return Meta{}, nil, fmt.Errorf("block: pack %s: a member without a component key", key)
		case seen[m.Component]:
			return Meta{}, nil, fmt.Errorf("block: pack %s: component %s twice", key, m.Component.Short())
		case m.Block.ID() != raw.ID || m.Block.InputVersion() > raw.Ref().Version():
			return Meta{}, nil, fmt.Errorf("block: pack %s: member %s is of block %s, not of raw block %s", key, m.Component.Short(), m.Block, raw.Ref())
		case m.Value == nil || m.Value.Len() != eventID.Len():
			return Meta{}, nil, fmt.Errorf("block: pack %s: member %s is not row-aligned with the raw block's %d rows", key, m.Component.Short(), eventID.Len())
		}
		seen[m.Component] = true
		name := MemberColumn(m.Component)
		meta.Columns = append(meta.Columns, Column{Name: name, InputVersion: blockref.Stored(m.Block.InputVersion())})
		fields = append(fields, arrow.Field{Name: name, Type: m.Value.DataType(), Nullable: true})
		cols = append(cols, m.Value)
	}
	return meta, array.NewRecord(arrow.NewSchema(fields, nil), cols, raw.Rows), nil
}

// WritePacks writes members of raw block version raw as packs: ordered by
// Group, then component key, cut where the next group would pass
// opts.MaxBytes (PlanPacks), each pack a new object (opts.NewKey), never
// one overwritten, so a reader may keep a pack's footer by its key and a
// crash between writing a pack and naming it leaves at most an object no
// one names. It returns the packs' metadata and where each member went, in
// the members' order. A failure may leave packs written before it:
// objects no memo entry names.
func WritePacks(ctx context.Context, store objstore.Writer, raw Meta, eventID arrow.Array, members []PackMember, opts PackOptions) ([]Meta, []Packed, error) {
	if len(members) == 0 {
		return nil, nil, fmt.Errorf("block: packs of %s: no members", raw.Ref())
	}
	order := make([]int, len(members))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ma, mb := &members[a], &members[b]
		return cmp.Or(cmp.Compare(ma.Group, mb.Group), bytes.Compare(ma.Component[:], mb.Component[:]))
	})
	sizes := make([]int64, len(order))
	groups := make([]string, len(order))
	for x, i := range order {
		if members[i].Value != nil {
			sizes[x] = arraySize(members[i].Value.Data())
		}
		groups[x] = members[i].Group
	}
	maxBytes := opts.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultPackBytes
	}
	newKey := opts.NewKey
	if newKey == nil {
		newKey = NewPackKey
	}
	enc := opts.EncodeOptions
	if c, ok := raw.Column(transform.ColEventID); ok {
		enc.Columns = map[string]Compression{transform.ColEventID: c.Compression}
		for name, comp := range opts.Columns {
			if name != transform.ColEventID {
				enc.Columns[name] = comp
			}
		}
	}
	var metas []Meta
	out := make([]Packed, len(members))
	for _, plan := range PlanPacks(sizes, groups, maxBytes) {
		ms := make([]PackMember, len(plan))
		for x, p := range plan {
			ms[x] = members[order[p]]
		}
		meta, rec, err := packRecord(newKey(raw.Source, raw.Ref()), raw, eventID, ms)
		if err != nil {
			return metas, nil, err
		}
		penc := enc
		if !opts.Wide {
			penc.Narrow = slices.Clip(enc.Narrow)
			for _, m := range ms {
				penc.Narrow = append(penc.Narrow, MemberColumn(m.Component))
			}
		}
		written, err := WriteWith(ctx, store, meta, rec, penc)
		rec.Release()
		if err != nil {
			return metas, nil, err
		}
		metas = append(metas, written)
		for _, p := range plan {
			i := order[p]
			c, _ := written.Column(MemberColumn(members[i].Component))
			out[i] = Packed{Component: members[i].Component, Block: members[i].Block, Object: written.Key, Column: c}
		}
	}
	return metas, out, nil
}

// validatePack checks a pack's columns (each member named by a component
// key, at an input version not past the pack's raw version) and that no
// other object claims input versions per column.
func (m *Meta) validatePack() error {
	if !m.Pack {
		for _, c := range m.Columns {
			if c.InputVersion != 0 {
				return fmt.Errorf("block %s: column %s has an input version outside a pack", m.ID, c.Name)
			}
		}
		return nil
	}
	if m.ComponentKey != (canon.Key{}) {
		return fmt.Errorf("block %s: a pack names no one component", m.ID)
	}
	for i, c := range m.Columns {
		if i == 0 && c.Name == transform.ColEventID {
			if c.InputVersion != 0 {
				return fmt.Errorf("block %s: event_id has an input version", m.ID)
			}
			continue
		}
		if _, err := canon.ParseKey(c.Name); err != nil {
			return fmt.Errorf("block %s: pack column %.80q is not a component key: %v", m.ID, c.Name, err)
		}
		if c.InputVersion < 0 || c.InputVersion > m.Ref().Version() {
			return fmt.Errorf("block %s version %d: member %.16s at input version %d", m.ID, m.Ref().Version(), c.Name, c.InputVersion)
		}
	}
	return nil
}

// Member returns the memo block of a pack's member column c: the pack's
// block id at the column's input version.
func (m *Meta) Member(c Column) blockref.Memo { return blockref.NewMemo(m.ID, c.InputVersion) }

// CheckMember checks from its footer that a memo object holds what a memo
// entry naming it and column takes it to hold: component k's column for
// memo block mb, of type typ, rows rows long (the raw block's), beside
// event_id. It returns the column's directory entry. column "" is an entry
// written before packs: the object is one component's (CheckMemo) and its
// column is MemoColumn. Otherwise the object must be a pack of mb's block
// at a raw version not before mb's input version, holding column
// MemberColumn(k) at mb's input version. The error is ErrCorrupt.
//
// Readers check every memo input with it, workers every memo node they
// read, and sigd a reported object: one check, so that a member a reader
// refuses is one sigd finds corrupt and recomputes (issue 27).
func CheckMember(meta Meta, column string, k canon.Key, mb blockref.Memo, typ string, rows int64) (Column, error) {
	if column == "" {
		if err := CheckMemo(meta, k, mb, typ, rows); err != nil {
			return Column{}, err
		}
		return meta.Columns[1], nil
	}
	if !meta.Pack {
		return Column{}, corrupt(meta.Key, "not a pack, but a memo entry names its column %.16s", column)
	}
	if column != MemberColumn(k) {
		return Column{}, corrupt(meta.Key, "column %.80q is not component %s's", column, k.Short())
	}
	if meta.ID != mb.ID() || mb.InputVersion() > meta.Ref().Version() {
		return Column{}, corrupt(meta.Key, "pack of block %q version %d, want block %q at a version holding input version %d",
			meta.ID, meta.Ref().Version(), mb.ID(), mb.InputVersion())
	}
	if len(meta.Columns) == 0 || meta.Columns[0].Name != transform.ColEventID || meta.Columns[0].Type != transform.Int64.String() {
		return Column{}, corrupt(meta.Key, "the first column is not event_id of type int64")
	}
	c, ok := meta.Column(column)
	if !ok {
		return Column{}, corrupt(meta.Key, "no member %s", k.Short())
	}
	if got := meta.Member(c); got != mb {
		return Column{}, corrupt(meta.Key, "member %s is at input version %d, want %d", k.Short(), got.InputVersion(), mb.InputVersion())
	}
	if c.Type != typ {
		return Column{}, corrupt(meta.Key, "member %s has type %s, want %s", k.Short(), c.Type, typ)
	}
	if meta.Rows != rows {
		return Column{}, corrupt(meta.Key, "%d rows, raw block has %d: not row-aligned", meta.Rows, rows)
	}
	return c, nil
}
