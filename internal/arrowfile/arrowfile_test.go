package arrowfile

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
	flatbuffers "github.com/google/flatbuffers/go"
)

// validFile writes a small Arrow IPC file: an int64 column and a
// list<utf8> column, two batches.
func validFile(t *testing.T) []byte {
	t.Helper()
	sch := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true}}, nil)
	p := filepath.Join(t.TempDir(), "f.arrow")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(sch))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
		b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
		lb := b.Field(1).(*array.ListBuilder)
		for _, n := range []int{0, 1, 2} {
			lb.Append(true)
			for range n {
				lb.ValueBuilder().(*array.StringBuilder).Append("x")
			}
		}
		rec := b.NewRecord()
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		b.Release()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// footer returns the offset of the footer flatbuffer in data and the
// checker over it.
func footer(data []byte) (int, *checker) {
	n := int(binary.LittleEndian.Uint32(data[len(data)-10:]))
	start := len(data) - 10 - n
	return start, &checker{buf: data[start : start+n]}
}

// vectorAt returns the offset in data of the length of the vector in slot
// of t (a table of the footer at base).
func vectorAt(t *flatbuffers.Table, base int, slot flatbuffers.VOffsetT) int {
	o := t.Offset(slot)
	return base + int(t.Vector(flatbuffers.UOffsetT(o))) - 4
}

// malformedFile is a file whose footer would make Arrow's reader allocate
// by a bogus length, recurse without end, or read a batch beyond the
// file, or which is cut short, and what the error reading it must say.
type malformedFile struct{ name, path, want string }

func malformedFiles(t *testing.T) []malformedFile {
	t.Helper()
	good := validFile(t)
	var out []malformedFile
	for _, tc := range []struct {
		name  string
		spoil func(data []byte)
		want  string
	}{
		{"fields vector of 2^31 entries", func(data []byte) {
			base, c := footer(data)
			schema, _ := c.table(c.root(), footerSchema)
			binary.LittleEndian.PutUint32(data[vectorAt(schema, base, schemaFields):], 1<<31-1)
		}, "vector of 2147483647 elements"},
		{"children vector of 2^30 entries", func(data []byte) {
			base, c := footer(data)
			schema, _ := c.table(c.root(), footerSchema)
			start, _ := c.vector(schema, schemaFields, 4)
			tags := c.at(int(schema.Indirect(flatbuffers.UOffsetT(start + 4))))
			binary.LittleEndian.PutUint32(data[vectorAt(tags, base, fieldChildren):], 1<<30)
		}, "vector of 1073741824 elements"},
		{"field that is its own child", func(data []byte) {
			base, c := footer(data)
			schema, _ := c.table(c.root(), footerSchema)
			start, _ := c.vector(schema, schemaFields, 4)
			tagsPos := schema.Indirect(flatbuffers.UOffsetT(start + 4))
			tags := c.at(int(tagsPos))
			elem := vectorAt(tags, base, fieldChildren) + 4 // the children's first offset
			binary.LittleEndian.PutUint32(data[elem:], uint32(int(tagsPos)-(elem-base)))
		}, "more fields than the footer has bytes for"},
		{"batch beyond the file", func(data []byte) {
			base, c := footer(data)
			start, _ := c.vector(c.root(), footerRecordBatches, blockSize)
			binary.LittleEndian.PutUint64(data[base+start+blockSize+16:], 1<<40) // second batch's body length
		}, "block 1 at"},
		{"batches overwritten", func(data []byte) { copy(data, data[len(data)/2:]) }, "record batch 0: "},
	} {
		data := append([]byte(nil), good...)
		tc.spoil(data)
		p := filepath.Join(t.TempDir(), "bad.arrow")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, malformedFile{tc.name, p, tc.want})
	}
	p := filepath.Join(t.TempDir(), "truncated.arrow")
	if err := os.WriteFile(p, good[:len(good)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	return append(out, malformedFile{"truncated", p, "not a valid Arrow IPC file"})
}

// TestReadFileMalformedMetadata: files whose footer would make Arrow's
// reader allocate by a bogus length, recurse without end, or read a batch
// beyond the file are errors naming the file. Without checkFile each of
// the first three kills the process (out of memory or stack overflow),
// which no recover catches.
func TestReadFileMalformedMetadata(t *testing.T) {
	for _, tc := range malformedFiles(t) {
		t.Run(tc.name, func(t *testing.T) {
			err := ReadFile(tc.path, func(int, arrow.Record) error { return nil })
			if err == nil || !strings.Contains(err.Error(), tc.path+": ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want an error naming %s with %q", err, tc.path, tc.want)
			}
		})
	}
	p := filepath.Join(t.TempDir(), "good.arrow")
	if err := os.WriteFile(p, validFile(t), 0o644); err != nil {
		t.Fatal(err)
	}
	var rows int64
	if err := ReadFile(p, func(_ int, rec arrow.Record) error { rows += rec.NumRows(); return nil }); err != nil || rows != 6 {
		t.Fatalf("valid file: %d rows, %v", rows, err)
	}
}
