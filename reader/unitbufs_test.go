package reader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	"github.com/sigdata/sig/warehouse/block"
)

// TestConcurrentUnitsShareNoBuffers serves many units at once on one
// reader, SIG, LIG and mixed, whole and resumed, some abandoned part-way,
// with every released fetch buffer scribbled over before it is pooled,
// and compares every batch, byte for byte as it is sent, with the same
// unit served alone. A buffer recycled while an array over it can still be
// read (or while a request still writes into it) changes a batch; under
// -race it is also a data race between two units. With compressed
// segments (ZSTD raw blocks, LZ4 memo objects) the decompressed buffers
// are the unit's too (block.DecodeSegmentInto), under the same rules.
func TestConcurrentUnitsShareNoBuffers(t *testing.T) {
	scribbleReleased.Store(true)
	t.Cleanup(func() { scribbleReleased.Store(false) })
	t.Run("uncompressed", func(t *testing.T) { testConcurrentUnitsShareNoBuffers(t, "", "") })
	t.Run("compressed", func(t *testing.T) { testConcurrentUnitsShareNoBuffers(t, block.ZSTD, block.LZ4Frame) })
}

func testConcurrentUnitsShareNoBuffers(t *testing.T, raw, memoComp block.Compression) {
	f := newFixture(t, fixtureConfig{Blocks: 3, RowsPerBlock: 3000, Nulls: true,
		Graphs: fleetGraphs(t, "ctr_small", "cvr"), RawCompression: raw, MemoCompression: memoComp})
	s := f.server(t, Config{MaxConcurrentUnits: 6})
	ctx := context.Background()
	modes := []func(int) readerv1.InputMode{allMode(memo), allMode(local), func(i int) readerv1.InputMode {
		if i%2 == 0 {
			return memo
		}
		return local
	}}
	const batch = 256
	// ref[b][m]: the batches of block b in mode m, served alone.
	ref := make([][][]*readerv1.ReadResponse, len(f.blocks))
	for b := range f.blocks {
		for m, mode := range modes {
			resps, err := collect(ctx, s, &readerv1.ReadRequest{Unit: f.unit(b, batch, mode)})
			if err != nil {
				t.Fatal(err)
			}
			if m > 0 {
				sameResponses(t, "SIG", ref[b][0], fmt.Sprintf("mode %d", m), resps)
			}
			ref[b] = append(ref[b], resps)
		}
	}

	const workers, perWorker = 16, 6
	var wg sync.WaitGroup
	errs := make(chan error, workers*perWorker)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range perWorker {
				b, m := rng.IntN(len(f.blocks)), rng.IntN(len(modes))
				want := ref[b][m]
				first := 0
				if rng.IntN(3) == 0 { // resume part-way, at a batch boundary
					first = rng.IntN(len(want) - 1)
				}
				abandonAt := -1
				if rng.IntN(4) == 0 {
					abandonAt = first + rng.IntN(len(want)-1-first)
				}
				uctx, cancel := context.WithCancel(ctx)
				next := first
				errAbandoned := errors.New("abandoned")
				err := s.Serve(uctx, &readerv1.ReadRequest{Unit: f.unit(b, batch, modes[m]), StartRow: want[first].StartRow},
					func(r *readerv1.ReadResponse) error {
						if next == abandonAt {
							cancel()
							return errAbandoned
						}
						if r.Summary != nil {
							next++
							return nil
						}
						if next >= len(want)-1 || r.StartRow != want[next].StartRow || !bytes.Equal(r.ArrowIpc, want[next].ArrowIpc) {
							return fmt.Errorf("block %d mode %d: batch %d (rows from %d) differs from the unit served alone", b, m, next, r.StartRow)
						}
						next++
						if rng.IntN(4) == 0 {
							runtime.Gosched() // let other units fetch and release meanwhile
						} else if rng.IntN(50) == 0 {
							time.Sleep(time.Millisecond)
						}
						return nil
					})
				cancel()
				switch {
				case abandonAt >= 0 && errors.Is(err, errAbandoned):
				case err != nil:
					errs <- err
				case next != len(want):
					errs <- fmt.Errorf("block %d mode %d: %d responses, want %d", b, m, next-first, len(want)-first)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := s.Stats(); st.Failures == 0 || st.Units < workers*perWorker/2 {
		t.Logf("stats %+v", st)
	}
}

// A fetch asking for a buffer after its unit's buffers went back is a bug
// that must not pass silently.
func TestUnitBuffersAfterRelease(t *testing.T) {
	var u unitBuffers
	b := u.alloc(5000)
	if len(b) != 5000 {
		t.Fatalf("alloc(5000): %d bytes", len(b))
	}
	u.release()
	defer func() {
		if recover() == nil {
			t.Fatal("alloc after release did not panic")
		}
	}()
	u.alloc(10)
}
