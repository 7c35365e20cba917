package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sigdata/sig/internal/devenv"
	"github.com/sigdata/sig/warehouse/objstore"
)

// GetRangeInto and GetSuffixInto write into the caller's buffer, whatever
// it held, exactly the object's bytes of the range or suffix, and refuse
// a range past the end, an empty one and a missing object.
func TestReadInto(t *testing.T) {
	m := devenv.NewMinIO(t)
	s := newStore(t, m, nil)
	ctx := context.Background()
	data := randBytes(700<<10, 11)
	if _, err := s.Put(ctx, "raw/ads/into.arrow", data, nil); err != nil {
		t.Fatal(err)
	}
	dirty := func(n int) []byte { return bytes.Repeat([]byte{0xA5}, n) }
	before := s.Stats()
	for _, r := range [][2]int{{0, 1}, {1000, 5000}, {0, len(data)}, {len(data) - 300<<10, 300 << 10}} {
		dst := dirty(r[1])
		if err := s.GetRangeInto(ctx, "raw/ads/into.arrow", int64(r[0]), dst, nil); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(dst, data[r[0]:r[0]+r[1]]) {
			t.Fatalf("range %v: different bytes", r)
		}
	}
	if got := s.Stats().BytesRead - before.BytesRead; got != 1+5000+int64(len(data))+300<<10 {
		t.Fatalf("BytesRead grew by %d", got)
	}
	if err := s.GetRangeInto(ctx, "raw/ads/into.arrow", int64(len(data))-10, dirty(20), nil); err == nil || !strings.Contains(err.Error(), "beyond size") {
		t.Fatalf("range past the end: %v", err)
	}
	if err := s.GetRangeInto(ctx, "raw/ads/into.arrow", 0, nil, nil); err == nil {
		t.Fatal("empty range accepted")
	}
	if err := s.GetRangeInto(ctx, "raw/ads/nope.arrow", 0, dirty(10), nil); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("missing object: %v, want ErrNotFound", err)
	}

	// Progress: contiguous chunks covering the range.
	dst := dirty(len(data))
	next := 0
	err := s.GetRangeInto(ctx, "raw/ads/into.arrow", 0, dst, func(lo, hi int) {
		if lo != next || hi <= lo || !bytes.Equal(dst[lo:hi], data[lo:hi]) {
			t.Errorf("filled(%d, %d) after %d", lo, hi, next)
		}
		next = hi
	})
	if err != nil || next != len(data) || !bytes.Equal(dst, data) {
		t.Fatalf("GetRangeInto with filled: %v, filled up to %d", err, next)
	}

	for _, n := range []int{16, 64 << 10, 2 << 20} {
		buf := dirty(n)
		got, info, err := s.GetSuffixInto(ctx, "raw/ads/into.arrow", buf)
		if err != nil {
			t.Fatal(err)
		}
		want := data[max(0, len(data)-n):]
		if got != len(want) || !bytes.Equal(buf[:got], want) || info.Size != int64(len(data)) || !info.HasChecksum {
			t.Fatalf("suffix %d: n %d, info %+v", n, got, info)
		}
	}
	if _, _, err := s.GetSuffixInto(ctx, "raw/ads/nope.arrow", dirty(10)); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("missing object: %v, want ErrNotFound", err)
	}
}

// A body cut part-way is retried into the same buffer, from the start.
func TestReadIntoRetriesCutBody(t *testing.T) {
	m := devenv.NewMinIO(t)
	p := newCutProxy(t, m.Endpoint)
	s := newStore(t, m, func(c *objstore.Config) { c.Endpoint = p.addr })
	ctx := context.Background()
	data := randBytes(3<<20, 12)
	if _, err := s.Put(ctx, "raw/ads/cut.arrow", data, nil); err != nil {
		t.Fatal(err)
	}
	dst := bytes.Repeat([]byte{0x5A}, len(data)-1000)
	var starts int
	next := 0
	p.cutAfter.Store(700 << 10) // within the third chunk GetRangeInto reads
	err := s.GetRangeInto(ctx, "raw/ads/cut.arrow", 1000, dst, func(lo, hi int) {
		if lo == 0 {
			starts++
		} else if lo != next {
			t.Errorf("filled(%d, %d) after %d", lo, hi, next)
		}
		next = hi
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.cuts.Load() != 1 || starts != 2 || s.Stats().Retries == 0 {
		t.Fatalf("cuts %d, attempts seen %d, retries %d; want a cut body read again", p.cuts.Load(), starts, s.Stats().Retries)
	}
	if !bytes.Equal(dst, data[1000:]) {
		t.Fatal("bytes differ after a retried read")
	}
}

// cutProxy forwards TCP to MinIO; once cutAfter is set, the next response
// is cut (both connections closed) after that many bytes.
type cutProxy struct {
	addr     string
	cutAfter atomic.Int64
	cuts     atomic.Int64
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{addr: ln.Addr().String()}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close() // idle keep-alive connections
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, u)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(u, c); u.Close() }()
			go func() {
				defer wg.Done()
				defer c.Close()
				defer u.Close()
				buf := make([]byte, 32<<10)
				var sent int64
				for {
					n, err := u.Read(buf)
					if n > 0 {
						if lim := p.cutAfter.Load(); lim > 0 && sent+int64(n) > lim {
							if p.cutAfter.CompareAndSwap(lim, 0) {
								c.Write(buf[:lim-sent])
								p.cuts.Add(1)
								return
							}
						}
						if _, err := c.Write(buf[:n]); err != nil {
							return
						}
						sent += int64(n)
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return p
}
