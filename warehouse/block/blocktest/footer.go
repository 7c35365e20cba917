package blocktest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/sigdata/sig/warehouse/block"
)

// FooterDamage is one byte of a block object's footer flipped (its lowest
// bit: a digit stays a digit, so a number stays a number of another
// value): the byte At bytes after the Nth occurrence (from 0) of Field in
// the footer's JSON; At -1 is Field's own last byte.
type FooterDamage struct {
	Name  string
	Field string
	Nth   int
	At    int
	// Rot leaves the trailer's CRC-32C of the footer as it was, as a byte
	// rotting in place does; otherwise it is computed over the damaged
	// footer, as a writer that wrote the wrong footer computes it.
	Rot bool
}

// MemoFooterDamages are the damages of a memo object's footer that readers
// refuse: a value each (the value segment's CRC-32C, offset and length,
// event_id's CRC-32C and length, the rows, the component key, the block
// id, the format, the value's type and name), the JSON's structure, and
// a rotted byte. Each leaves the segments' bytes as they were. (event_id's
// offset is not among them: a reader takes the raw block's event_id
// segment when the footers give both the same length and CRC-32C, so it
// reads such an object correctly and refuses nothing.)
var MemoFooterDamages = []FooterDamage{
	{Name: "value crc32c", Field: `"crc32c":`, Nth: 1},
	{Name: "value offset", Field: `"offset":`, Nth: 1},
	{Name: "value length", Field: `"length":`, Nth: 1},
	{Name: "event_id crc32c", Field: `"crc32c":`},
	{Name: "event_id length", Field: `"length":`},
	{Name: "rows", Field: `"rows":`},
	{Name: "component key", Field: `"component_key":"`},
	{Name: "block id", Field: `"id":"`},
	{Name: "format", Field: `"format":`},
	{Name: "value type", Field: `"type":"`, Nth: 1},
	{Name: "value name", Field: `"name":"`, Nth: 1},
	{Name: "json structure", Field: `"rows":`, At: -1},
	{Name: "rotted byte", Field: `"rows":`, Rot: true},
}

// PackFooterDamages are MemoFooterDamages for a pack of one member (issue
// 28): the member column's segment, name and type in place of the value's,
// and the pack flag in place of the component key.
var PackFooterDamages = []FooterDamage{
	{Name: "member crc32c", Field: `"crc32c":`, Nth: 1},
	{Name: "member offset", Field: `"offset":`, Nth: 1},
	{Name: "member length", Field: `"length":`, Nth: 1},
	{Name: "event_id crc32c", Field: `"crc32c":`},
	{Name: "event_id length", Field: `"length":`},
	{Name: "rows", Field: `"rows":`},
	{Name: "pack flag", Field: `"pack":`},
	{Name: "block id", Field: `"id":"`},
	{Name: "format", Field: `"format":`},
	{Name: "member type", Field: `"type":"`, Nth: 1},
	{Name: "member name", Field: `"name":"`, Nth: 1},
	{Name: "json structure", Field: `"rows":`, At: -1},
	{Name: "rotted byte", Field: `"rows":`, Rot: true},
}

// DamageFooter returns a copy of data, a whole block object, with d done
// to its footer. Storing it with objstore.Checksum of the result as the
// object's checksum is storing what a writer with that bug would.
func DamageFooter(data []byte, d FooterDamage) ([]byte, error) {
	out := bytes.Clone(data)
	if len(out) < block.TrailerSize {
		return nil, fmt.Errorf("%s: object of %d bytes has no trailer", d.Name, len(out))
	}
	tr := out[len(out)-block.TrailerSize:]
	n := int(binary.LittleEndian.Uint32(tr))
	if n > len(out)-block.TrailerSize {
		return nil, fmt.Errorf("%s: footer of %d bytes in an object of %d", d.Name, n, len(out))
	}
	footer := out[len(out)-block.TrailerSize-n : len(out)-block.TrailerSize]
	at := 0
	for i := 0; i <= d.Nth; i++ {
		j := bytes.Index(footer[at:], []byte(d.Field))
		if j < 0 {
			return nil, fmt.Errorf("%s: footer has %d occurrences of %s, want %d: %s", d.Name, i, d.Field, d.Nth+1, footer)
		}
		at += j + len(d.Field)
	}
	at += d.At
	if at < 0 || at >= len(footer) {
		return nil, fmt.Errorf("%s: byte %d outside the footer of %d bytes", d.Name, at, len(footer))
	}
	footer[at] ^= 0x01
	if !d.Rot {
		binary.LittleEndian.PutUint32(tr[4:], crc32.Checksum(footer, crc32.MakeTable(crc32.Castagnoli)))
	}
	return out, nil
}

// RewriteFooter returns a copy of data, a whole block object, with its
// footer's JSON replaced by edit(footer) and the trailer's length and
// CRC-32C written to match: a footer a writer with a bug could write.
func RewriteFooter(tb testing.TB, data []byte, edit func(footer string) string) []byte {
	tb.Helper()
	if len(data) < block.TrailerSize {
		tb.Fatalf("object of %d bytes has no trailer", len(data))
	}
	tr := data[len(data)-block.TrailerSize:]
	n := int(binary.LittleEndian.Uint32(tr))
	if n > len(data)-block.TrailerSize {
		tb.Fatalf("footer of %d bytes in an object of %d", n, len(data))
	}
	start := len(data) - block.TrailerSize - n
	footer := []byte(edit(string(data[start : len(data)-block.TrailerSize])))
	out := append(bytes.Clone(data[:start]), footer...)
	var t [block.TrailerSize]byte
	binary.LittleEndian.PutUint32(t[0:], uint32(len(footer)))
	binary.LittleEndian.PutUint32(t[4:], crc32.Checksum(footer, crc32.MakeTable(crc32.Castagnoli)))
	copy(t[8:], block.Magic)
	return append(out, t[:]...)
}
