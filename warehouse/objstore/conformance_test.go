package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/sigdata/sig/internal/devenv"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/warehouse/objstore/memstore"
)

// bucket is every call the conformance cases make: objstore.Store's and
// memstore.Store's common methods.
type bucket interface {
	objstore.Reader
	objstore.Writer
	Stat(ctx context.Context, key string) (objstore.Info, error)
	Delete(ctx context.Context, key string) error
	DeleteMany(ctx context.Context, keys []string) (int, error)
	List(ctx context.Context, prefix string) iter.Seq2[objstore.Info, error]
}

// TestConformance runs testdata/conformance.txt against a real MinIO and
// memstore in lockstep: each command runs on both, the case's expected
// output is MinIO's (so -rewrite writes what MinIO does), and a command on
// which memstore answers otherwise fails the test. The in-memory store that
// tests about logic use cannot drift from the store SIG runs on.
//
// A script's commands (one bucket, empty at the start of the file):
//
//	put key=K [random=N] [sum=HEX] [meta=(k=v, ...)]   the input's bytes, or N random ones; sum: PutChecksummed
//	get key=K | stat key=K
//	range key=K off=O len=N        GetRangeInto
//	from key=K off=O [max=M]       GetFromInto (max default 1 GiB)
//	suffix key=K len=N             GetSuffixInto
//	list prefix=P | delete key=K | delete-many keys=(K, ...)
//
// Bytes read print as a quoted string up to 64 bytes, else as their length
// and CRC-32C; an error prints as the sentinel it wraps (ErrNotFound,
// ErrRange, ErrCorrupt) or "error: other". Reads into a buffer start from
// one full of 0xA5, and every read reports its bytes through filled, whose
// contract (contiguous chunks from 0 to the end, each holding its bytes
// when reported) is checked and printed when broken.
func TestConformance(t *testing.T) {
	m := devenv.NewMinIO(t)
	stores := []struct {
		name string
		b    bucket
	}{{"minio", newStore(t, m, nil)}, {"memstore", memstore.New()}}
	datadriven.RunTest(t, "testdata/conformance.txt", func(t *testing.T, td *datadriven.TestData) string {
		var outs []string
		for _, s := range stores {
			outs = append(outs, runConformance(t, td, s.b))
		}
		if outs[0] != outs[1] {
			t.Errorf("%s: %s:\n%s: %s%s: %s", td.Pos, td.FullCmd(), stores[0].name, outs[0], stores[1].name, outs[1])
		}
		return outs[0]
	})
}

func runConformance(t *testing.T, td *datadriven.TestData, b bucket) string {
	ctx := context.Background()
	var out strings.Builder
	arg := func(k string) string {
		if a, ok := td.Arg(k); ok {
			return a.SingleVal(t)
		}
		return ""
	}
	num := func(k string, def int64) int64 {
		s := arg(k)
		if s == "" {
			return def
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			td.Fatalf(t, "%s=%s: %v", k, s, err)
		}
		return n
	}
	key := arg("key")
	// progress returns a filled callback that records where it breaks its
	// contract in broken, and a check that it reached the end of buf.
	var broken []string
	progress := func(buf *[]byte, want func(lo, hi int) []byte) (filled func(lo, hi int), done func()) {
		next := 0
		filled = func(lo, hi int) {
			if lo != 0 && lo != next {
				broken = append(broken, fmt.Sprintf("filled(%d, %d) after %d", lo, hi, next))
			}
			if hi <= lo || hi > len(*buf) {
				broken = append(broken, fmt.Sprintf("filled(%d, %d) of %d bytes", lo, hi, len(*buf)))
			} else if w := want(lo, hi); w != nil && !bytes.Equal((*buf)[lo:hi], w) {
				broken = append(broken, fmt.Sprintf("filled(%d, %d) before the bytes arrived", lo, hi))
			}
			next = hi
		}
		done = func() {
			if next != len(*buf) {
				broken = append(broken, fmt.Sprintf("filled up to %d of %d", next, len(*buf)))
			}
		}
		return filled, done
	}
	printErr := func(err error) {
		switch {
		case errors.Is(err, objstore.ErrNotFound):
			out.WriteString("error: ErrNotFound\n")
		case errors.Is(err, objstore.ErrRange):
			out.WriteString("error: ErrRange\n")
		case errors.Is(err, objstore.ErrCorrupt):
			out.WriteString("error: ErrCorrupt\n")
		default:
			out.WriteString("error: other\n")
		}
	}
	printInfo := func(info objstore.Info, withMeta bool) {
		fmt.Fprintf(&out, "size=%d", info.Size)
		if info.HasChecksum {
			fmt.Fprintf(&out, " crc32c=%08x", info.Checksum)
		}
		if withMeta {
			var kv []string
			for k, v := range info.Metadata {
				kv = append(kv, k+"="+v)
			}
			slices.Sort(kv)
			if len(kv) > 0 {
				fmt.Fprintf(&out, " meta=(%s)", strings.Join(kv, ", "))
			}
		}
		out.WriteString("\n")
	}
	printBytes := func(b []byte) {
		if len(b) <= 64 {
			fmt.Fprintf(&out, "%q\n", b)
		} else {
			fmt.Fprintf(&out, "%d bytes crc32c=%08x\n", len(b), objstore.Checksum(b))
		}
	}
	dirty := func(n int64) []byte { return bytes.Repeat([]byte{0xA5}, int(n)) }

	switch td.Cmd {
	case "put":
		data := []byte(td.Input)
		if n := num("random", -1); n >= 0 {
			data = randBytes(int(n), uint64(len(key)))
		}
		var meta map[string]string
		if a, ok := td.Arg("meta"); ok {
			meta = map[string]string{}
			for _, v := range a.Vals {
				k, v, _ := strings.Cut(v, "=")
				meta[k] = v
			}
		}
		var (
			info objstore.Info
			err  error
		)
		if s := arg("sum"); s != "" {
			sum, perr := strconv.ParseUint(s, 16, 32)
			if perr != nil {
				td.Fatalf(t, "sum=%s: %v", s, perr)
			}
			info, err = b.PutChecksummed(ctx, key, data, uint32(sum), meta)
		} else {
			info, err = b.Put(ctx, key, data, meta)
		}
		if err != nil {
			printErr(err)
			break
		}
		printInfo(info, false)
	case "get":
		data, info, err := b.Get(ctx, key)
		if err != nil {
			printErr(err)
			break
		}
		printInfo(info, true)
		printBytes(data)
	case "stat":
		info, err := b.Stat(ctx, key)
		if err != nil {
			printErr(err)
			break
		}
		printInfo(info, true)
	case "range":
		off, n := num("off", 0), num("len", 0)
		dst := dirty(max(n, 0))
		var whole []byte // the object, to check what filled reports
		if data, _, err := b.Get(ctx, key); err == nil {
			whole = data
		}
		filled, done := progress(&dst, func(lo, hi int) []byte {
			if whole == nil || off+int64(hi) > int64(len(whole)) {
				return nil
			}
			return whole[off+int64(lo) : off+int64(hi)]
		})
		if err := b.GetRangeInto(ctx, key, off, dst, filled); err != nil {
			printErr(err)
			break
		}
		done()
		printBytes(dst)
	case "from":
		off, limit := num("off", 0), num("max", 1<<30)
		var whole, buf []byte
		if data, _, err := b.Get(ctx, key); err == nil {
			whole = data
		}
		allocs := 0
		filled, done := progress(&buf, func(lo, hi int) []byte {
			if whole == nil || off+int64(hi) > int64(len(whole)) {
				return nil
			}
			return whole[off+int64(lo) : off+int64(hi)]
		})
		got, info, err := b.GetFromInto(ctx, key, off, limit, func(n int) []byte {
			allocs++
			buf = dirty(int64(n))
			return buf
		}, filled)
		if err != nil {
			printErr(err)
			break
		}
		done()
		if allocs != 1 || len(got) != len(buf) || len(got) > 0 && &got[0] != &buf[0] {
			broken = append(broken, fmt.Sprintf("alloc called %d times, its buffer not the one returned", allocs))
		}
		printInfo(info, false)
		printBytes(got)
	case "suffix":
		dst := dirty(max(num("len", 0), 0))
		n, info, err := b.GetSuffixInto(ctx, key, dst)
		if err != nil {
			printErr(err)
			break
		}
		fmt.Fprintf(&out, "n=%d ", n)
		printInfo(info, false)
		printBytes(dst[:n])
	case "list":
		listed := false
		for info, err := range b.List(ctx, arg("prefix")) {
			if err != nil {
				printErr(err)
				break
			}
			listed = true
			fmt.Fprintf(&out, "%s size=%d\n", info.Key, info.Size)
			if info.HasChecksum || info.Metadata != nil {
				broken = append(broken, "a listing carries checksum or metadata")
			}
		}
		if !listed {
			out.WriteString("(none)\n")
		}
	case "delete":
		if err := b.Delete(ctx, key); err != nil {
			printErr(err)
			break
		}
		out.WriteString("ok\n")
	case "delete-many":
		a, _ := td.Arg("keys")
		n, err := b.DeleteMany(ctx, a.Vals)
		if err != nil {
			printErr(err)
			break
		}
		fmt.Fprintf(&out, "deleted %d\n", n)
	default:
		td.Fatalf(t, "unknown command %q", td.Cmd)
	}
	for _, s := range broken {
		fmt.Fprintf(&out, "broken: %s\n", s)
	}
	return out.String()
}
