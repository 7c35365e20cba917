package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/sigdata/sig/internal/devenv"
	"github.com/sigdata/sig/warehouse/objstore"
)

func newStore(t testing.TB, m *devenv.MinIO, mod func(*objstore.Config)) *objstore.Store {
	t.Helper()
	cfg := objstore.Config{Endpoint: m.Endpoint, AccessKey: m.AccessKey, SecretKey: m.SecretKey, Bucket: "test"}
	if mod != nil {
		mod(&cfg)
	}
	s, err := objstore.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func bareClient(t testing.TB, m *devenv.MinIO) *minio.Client {
	t.Helper()
	c, err := minio.New(m.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(m.AccessKey, m.SecretKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func randBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	m := devenv.NewMinIO(t)
	s := newStore(t, m, nil)
	ctx := context.Background()
	if err := s.EnsureBucket(ctx); err != nil {
		t.Fatalf("EnsureBucket twice: %v", err)
	}
	data := randBytes(300<<10, 1)
	info, err := s.Put(ctx, "raw/ads/b1.arrow", data, map[string]string{"sig-block": "b1"})
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != int64(len(data)) || info.Checksum != objstore.Checksum(data) {
		t.Fatalf("put info %+v", info)
	}
	got, ginfo, err := s.Get(ctx, "raw/ads/b1.arrow")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("get returned different bytes")
	}
	if ginfo.Metadata["Sig-Block"] != "b1" || !ginfo.HasChecksum {
		t.Fatalf("get info %+v", ginfo)
	}
	part, err := objstore.GetRange(ctx, s, "raw/ads/b1.arrow", 1000, 5000)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(part, data[1000:6000]) {
		t.Fatal("ranged get returned different bytes")
	}
	if _, err := objstore.GetRange(ctx, s, "raw/ads/b1.arrow", int64(len(data))-10, 20); err == nil {
		t.Fatal("range past the end succeeded")
	}
	suf, sinfo, err := objstore.GetSuffix(ctx, s, "raw/ads/b1.arrow", 16)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(suf, data[len(data)-16:]) || sinfo.Size != int64(len(data)) {
		t.Fatalf("suffix: size %d, want %d", sinfo.Size, len(data))
	}
	st, err := s.Stat(ctx, "raw/ads/b1.arrow")
	if err != nil || st.Size != int64(len(data)) || st.Checksum != info.Checksum {
		t.Fatalf("stat %+v %v", st, err)
	}
	if _, err := s.Put(ctx, "x", nil, map[string]string{"sig-crc32c": "0"}); err == nil {
		t.Fatal("reserved metadata key accepted")
	}
	if err := s.Delete(ctx, "raw/ads/b1.arrow"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, "raw/ads/b1.arrow"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("get after delete: %v, want ErrNotFound", err)
	}
	if _, err := s.Stat(ctx, "nope"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("stat missing: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "nope"); err != nil {
		t.Fatalf("delete missing: %v", err)
	}
}

// TestEmptyObjectSuffix: the suffix of an empty object is no bytes of an
// object of size 0, not an error (MinIO answers "bytes 0--1/0", which was
// refused as a bad Content-Range and reported as a failed read).
func TestEmptyObjectSuffix(t *testing.T) {
	m := devenv.NewMinIO(t)
	s := newStore(t, m, nil)
	ctx := context.Background()
	if _, err := s.Put(ctx, "memo/k/empty.arrow", nil, nil); err != nil {
		t.Fatal(err)
	}
	suf, info, err := objstore.GetSuffix(ctx, s, "memo/k/empty.arrow", 8192)
	if err != nil || len(suf) != 0 || info.Size != 0 {
		t.Fatalf("suffix of an empty object: %d bytes, size %d, %v; want 0, 0, nil", len(suf), info.Size, err)
	}
	if _, _, err := objstore.GetSuffix(ctx, s, "memo/k/missing.arrow", 8192); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("suffix of a missing object: %v, want ErrNotFound", err)
	}
}

func TestList(t *testing.T) {
	m := devenv.NewMinIO(t)
	s := newStore(t, m, nil)
	ctx := context.Background()
	// More than one listing page (1000 keys).
	var want []string
	for i := range 1100 {
		k := fmt.Sprintf("raw/ads/%05d.arrow", i)
		want = append(want, k)
		if _, err := s.Put(ctx, k, []byte{byte(i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Put(ctx, "memo/k/1.arrow", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	var got []string
	for info, err := range s.List(ctx, "raw/ads/") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, info.Key)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("listed %d keys, want %d in order", len(got), len(want))
	}
}

// An object overwritten behind the wrapper's back (bare minio-go, keeping the
// old checksum metadata, or with none) is reported, never served.
func TestCorruptOverwrittenThroughAPI(t *testing.T) {
	m := devenv.NewMinIO(t)
	s := newStore(t, m, nil)
	ctx := context.Background()
	data := randBytes(64<<10, 2)
	info, err := s.Put(ctx, "raw/ads/c.arrow", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(data)
	bad[100] ^= 0xff
	bare := bareClient(t, m)
	if _, err := bare.PutObject(ctx, "test", "raw/ads/c.arrow", bytes.NewReader(bad), int64(len(bad)),
		minio.PutObjectOptions{UserMetadata: map[string]string{objstore.MetaChecksum: fmt.Sprintf("%08x", info.Checksum)}}); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Get(ctx, "raw/ads/c.arrow")
	if !errors.Is(err, objstore.ErrCorrupt) || !strings.Contains(err.Error(), "raw/ads/c.arrow") {
		t.Fatalf("get of flipped object: %v, want ErrCorrupt naming the object", err)
	}
	if _, err := bare.PutObject(ctx, "test", "raw/ads/d.arrow", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, "raw/ads/d.arrow"); !errors.Is(err, objstore.ErrCorrupt) {
		t.Fatalf("get of object without checksum: %v, want ErrCorrupt", err)
	}
}

// Bytes flipped in MinIO's data directory are detected on read, whether
// MinIO's own bitrot check or our checksum catches them, and the error names
// the object.
func TestCorruptOnDisk(t *testing.T) {
	m := devenv.NewMinIO(t)
	s := newStore(t, m, nil)
	ctx := context.Background()
	for _, size := range []int{8 << 10, 3 << 20} { // inline in xl.meta, and in a part file
		key := fmt.Sprintf("raw/ads/disk-%d.arrow", size)
		data := randBytes(size, uint64(size))
		if _, err := s.Put(ctx, key, data, nil); err != nil {
			t.Fatal(err)
		}
		flipped := flipInObjectDir(t, filepath.Join(m.DataDir, "test", key), data)
		got, _, err := s.Get(ctx, key)
		if err == nil {
			t.Fatalf("size %d: corrupted object served (%d bytes, equal=%v, flipped %s)", size, len(got), bytes.Equal(got, data), flipped)
		}
		if !errors.Is(err, objstore.ErrCorrupt) || !strings.Contains(err.Error(), key) {
			t.Fatalf("size %d: %v, want ErrCorrupt naming the object", size, err)
		}
		t.Logf("size %d: flipped %s: %v", size, flipped, err)
	}
}

// flipInObjectDir flips a byte of the object's payload inside MinIO's on-disk
// representation: in the part file if there is one, else inside xl.meta where
// the payload is inlined.
func flipInObjectDir(t *testing.T, dir string, data []byte) string {
	t.Helper()
	var files []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	probe := data[len(data)/2 : len(data)/2+32]
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(b, probe); i >= 0 {
			b[i] ^= 0x01
			if err := os.WriteFile(f, b, 0o644); err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("payload not found under %s (files %v)", dir, files)
	return ""
}

// A MinIO outage in the middle of an operation delays it; it then succeeds.
func TestRetriesAcrossOutage(t *testing.T) {
	m := devenv.NewMinIO(t)
	s := newStore(t, m, func(c *objstore.Config) { c.AttemptTimeout = 2 * time.Second })
	ctx := context.Background()
	data := randBytes(1<<20, 3)
	m.Kill()
	done := make(chan error, 1)
	go func() {
		_, err := s.Put(ctx, "raw/ads/outage.arrow", data, nil)
		done <- err
	}()
	time.Sleep(3 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("put finished while MinIO was down: %v", err)
	default:
	}
	if err := m.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("put across outage: %v", err)
	}
	got, _, err := s.Get(ctx, "raw/ads/outage.arrow")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get after outage: %v", err)
	}
}

// Permanent errors are not retried: wrong credentials fail at once.
func TestPermanentErrorNotRetried(t *testing.T) {
	m := devenv.NewMinIO(t)
	s, err := objstore.New(objstore.Config{Endpoint: m.Endpoint, AccessKey: m.AccessKey, SecretKey: "wrong-secret-key", Bucket: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = s.Put(ctx, "k", []byte("x"), nil)
	if err == nil {
		t.Fatal("put with a wrong secret succeeded")
	}
	if ctx.Err() != nil {
		t.Fatalf("wrong credentials were retried until the deadline: %v", err)
	}
}

func TestContextDeadline(t *testing.T) {
	m := devenv.NewMinIO(t)
	s := newStore(t, m, nil)
	m.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, _, err := s.Get(ctx, "k")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("get with MinIO down past the deadline: %v, want DeadlineExceeded", err)
	}
}

// TestReadsSigned covers the read path's own signed GETs (get.go) against
// the server: keys whose path needs escaping, a missing key, a range past
// the end and wrong credentials, each with the error a caller tests for,
// and wrong credentials not retried.
func TestReadsSigned(t *testing.T) {
	m := devenv.NewMinIO(t)
	s := newStore(t, m, nil)
	ctx := context.Background()
	data := randBytes(10<<10, 2)
	for _, key := range []string{"memo/ab cd/é+x=y&z.arrow", "raw/a%2Fb/~t*(1)!.arrow", "raw/plain.arrow"} {
		if _, err := s.Put(ctx, key, data, map[string]string{"Sig-Block": "b 1"}); err != nil {
			t.Fatal(err)
		}
		got, info, err := s.Get(ctx, key)
		if err != nil || !bytes.Equal(got, data) || info.Metadata["Sig-Block"] != "b 1" || info.ETag == "" || info.LastModified.IsZero() {
			t.Fatalf("get %q: %+v, %v", key, info, err)
		}
		part, err := objstore.GetRange(ctx, s, key, 100, 200)
		if err != nil || !bytes.Equal(part, data[100:300]) {
			t.Fatalf("range of %q: %v", key, err)
		}
		suf, sinfo, err := objstore.GetSuffix(ctx, s, key, 50)
		if err != nil || !bytes.Equal(suf, data[len(data)-50:]) || sinfo.Size != int64(len(data)) || sinfo.Checksum != objstore.Checksum(data) {
			t.Fatalf("suffix of %q: %+v, %v", key, sinfo, err)
		}
	}
	mk := func(n int) []byte { return make([]byte, n) }
	from, info, err := s.GetFromInto(ctx, "raw/plain.arrow", 100, 1<<20, mk, nil)
	if err != nil || !bytes.Equal(from, data[100:]) || info.Size != int64(len(data)) {
		t.Fatalf("from byte 100: %d bytes, %+v, %v", len(from), info, err)
	}
	if _, _, err := s.GetFromInto(ctx, "raw/plain.arrow", 100, 99, mk, nil); err == nil {
		t.Fatal("more than max read")
	}
	if _, _, err := s.GetFromInto(ctx, "raw/plain.arrow", int64(len(data)), 1<<20, mk, nil); !errors.Is(err, objstore.ErrRange) {
		t.Fatalf("from the end: %v, want ErrRange", err)
	}
	if _, err := objstore.GetRange(ctx, s, "raw/missing.arrow", 0, 10); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("range of a missing key: %v, want ErrNotFound", err)
	}
	if _, err := objstore.GetRange(ctx, s, "raw/plain.arrow", int64(len(data)), 10); err == nil || errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("range starting at the end: %v, want an error other than not found", err)
	}

	wrong, err := objstore.New(objstore.Config{Endpoint: m.Endpoint, AccessKey: m.AccessKey, SecretKey: "wrong-secret-key", Bucket: "test"})
	if err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, _, err = wrong.Get(dctx, "raw/plain.arrow")
	if err == nil || dctx.Err() != nil || !strings.Contains(err.Error(), "SignatureDoesNotMatch") && !strings.Contains(err.Error(), "signature") {
		t.Fatalf("get with a wrong secret: %v (deadline %v), want a signature error at once", err, dctx.Err())
	}
	if st := wrong.Stats(); st.Retries != 0 {
		t.Fatalf("a wrong signature was retried %d times", st.Retries)
	}
}
