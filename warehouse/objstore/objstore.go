package objstore

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"iter"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/sigdata/sig/internal/clock"
)

// Sentinel errors. Errors returned by Store wrap them; test with errors.Is.
var (
	// ErrNotFound: the object (or bucket) does not exist.
	ErrNotFound = errors.New("object not found")
	// ErrCorrupt: the bytes read do not match the checksum stored with the
	// object, or the object carries no valid checksum.
	ErrCorrupt = errors.New("object corrupt")
	// ErrRange: a ranged read starts at or past the object's end (HTTP 416).
	ErrRange = errors.New("range not satisfiable")
)

// MetaChecksum is the user-metadata key under which Put stores the CRC-32C of
// the object, as 8 lower-case hex digits. S3 sends it as
// x-amz-meta-sig-crc32c.
const MetaChecksum = "Sig-Crc32c"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C (Castagnoli) of b, the checksum kept with every
// object.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Config configures a Store. Call EnsureDefaults (New does) to fill zero
// fields.
type Config struct {
	// Endpoint is host:port of the S3 API.
	Endpoint string
	// AccessKey and SecretKey are the credentials.
	AccessKey, SecretKey string
	// Bucket is the bucket every operation addresses.
	Bucket string
	// Secure selects HTTPS.
	Secure bool
	// Region is the bucket's region. Default "us-east-1".
	Region string
	// AttemptTimeout bounds one request, including reading the body.
	// Default 60s.
	AttemptTimeout time.Duration
	// RetryFor bounds how long one operation retries transient failures
	// before returning the last error. The caller's context can end it
	// sooner. Default 2m, long enough to ride out a server restart.
	RetryFor time.Duration
	// InitialBackoff and MaxBackoff bound the wait between attempts, which
	// doubles from InitialBackoff up to MaxBackoff, with jitter.
	// Defaults 50ms and 2s.
	InitialBackoff, MaxBackoff time.Duration
	// Clock times the backoff waits. Default the wall clock.
	Clock clock.Clock
	// Logger receives one line per retried failure. Default: discard.
	Logger *slog.Logger
}

// EnsureDefaults fills zero fields with their defaults.
func (c *Config) EnsureDefaults() {
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if c.AttemptTimeout <= 0 {
		c.AttemptTimeout = 60 * time.Second
	}
	if c.RetryFor <= 0 {
		c.RetryFor = 2 * time.Minute
	}
	if c.InitialBackoff <= 0 {
		c.InitialBackoff = 50 * time.Millisecond
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 2 * time.Second
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Info describes a stored object.
type Info struct {
	Key          string
	Size         int64
	ETag         string
	LastModified time.Time
	// Checksum is the CRC-32C stored with the object; HasChecksum is false
	// for objects not written through Put.
	Checksum    uint32
	HasChecksum bool
	// Metadata holds the caller's user metadata given to Put (keys in
	// canonical header form without the x-amz-meta- prefix), excluding
	// MetaChecksum. Listings leave it nil.
	Metadata map[string]string
}

// Store is a bucket on an S3-compatible server.
type Store struct {
	cfg    Config
	client *minio.Client
	// Reads are signed GETs on the same transport (get.go).
	http   *http.Client
	signer *sigV4

	requests, retries, bytesRead, bytesWritten atomic.Int64
}

// Stats counts a Store's traffic since New.
type Stats struct {
	// Requests counts attempts (each retry is one more).
	Requests int64
	// Retries counts attempts that failed transiently and were retried.
	Retries int64
	// BytesRead and BytesWritten count object bytes moved by successful
	// reads and writes (payload only, not headers).
	BytesRead, BytesWritten int64
}

// Stats returns the traffic counters.
func (s *Store) Stats() Stats {
	return Stats{Requests: s.requests.Load(), Retries: s.retries.Load(),
		BytesRead: s.bytesRead.Load(), BytesWritten: s.bytesWritten.Load()}
}

// New returns a Store for cfg.Bucket. It does not contact the server.
func New(cfg Config) (*Store, error) {
	cfg.EnsureDefaults()
	if cfg.Endpoint == "" || cfg.Bucket == "" {
		return nil, errors.New("objstore: endpoint and bucket are required")
	}
	tr, err := minio.DefaultTransport(cfg.Secure)
	if err != nil {
		return nil, err
	}
	// A dead connection must surface quickly so that the retry loop, not
	// the kernel, decides how long to wait.
	tr.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	tr.ResponseHeaderTimeout = cfg.AttemptTimeout
	// A reader fetches a unit's segments in parallel, several units at a
	// time: keep the connections of a burst for the next one (minio-go
	// keeps 16 per host and closes the rest).
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1024, 256
	cl, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:      credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:     cfg.Secure,
		Region:     cfg.Region,
		Transport:  tr,
		MaxRetries: 1, // one retry policy: ours
	})
	if err != nil {
		return nil, fmt.Errorf("objstore: %w", err)
	}
	return &Store{cfg: cfg, client: cl,
		http: &http.Client{Transport: tr,
			// S3 does not redirect a path-style GET; a redirect is an error.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		signer: &sigV4{accessKey: cfg.AccessKey, secretKey: cfg.SecretKey, region: cfg.Region}}, nil
}

// Bucket returns the bucket name.
func (s *Store) Bucket() string { return s.cfg.Bucket }

// Endpoint returns the server address.
func (s *Store) Endpoint() string { return s.cfg.Endpoint }

// EnsureBucket creates the bucket if it does not exist.
func (s *Store) EnsureBucket(ctx context.Context) error {
	return s.retry(ctx, "make bucket "+s.cfg.Bucket, func(ctx context.Context) error {
		ok, err := s.client.BucketExists(ctx, s.cfg.Bucket)
		if err != nil || ok {
			return err
		}
		err = s.client.MakeBucket(ctx, s.cfg.Bucket, minio.MakeBucketOptions{Region: s.cfg.Region})
		if code := minio.ToErrorResponse(err).Code; code == "BucketAlreadyOwnedByYou" || code == "BucketAlreadyExists" {
			return nil
		}
		return err
	})
}

// Put stores data under key, with its CRC-32C and the caller's user metadata
// (which must not use MetaChecksum). An existing object is replaced whole:
// readers see the old or the new bytes, never a mix.
func (s *Store) Put(ctx context.Context, key string, data []byte, metadata map[string]string) (Info, error) {
	return s.PutChecksummed(ctx, key, data, Checksum(data), metadata)
}

// PutChecksummed is Put for a caller that already has Checksum(data), such
// as block.Encode, which builds it from its segments' checksums: the bytes
// are not read once more to compute it. A wrong sum is not silent: every
// full read (Get) of the object then fails with ErrCorrupt. Ranged reads do
// not see it; they rely on the checksums their callers keep per range.
func (s *Store) PutChecksummed(ctx context.Context, key string, data []byte, sum uint32, metadata map[string]string) (Info, error) {
	um := make(map[string]string, len(metadata)+1)
	for k, v := range metadata {
		if http.CanonicalHeaderKey(k) == MetaChecksum {
			return Info{}, fmt.Errorf("objstore: put %s: metadata key %s is reserved", key, k)
		}
		um[k] = v
	}
	um[MetaChecksum] = fmt.Sprintf("%08x", sum)
	var info Info
	err := s.retry(ctx, "put "+key, func(ctx context.Context) error {
		ui, err := s.client.PutObject(ctx, s.cfg.Bucket, key, bytes.NewReader(data), int64(len(data)),
			// No SHA-256 of the payload for the request signature: the
			// CRC-32C in the (signed) metadata already protects the bytes end
			// to end, and hashing every object twice cost a worker CPU
			// for nothing.
			minio.PutObjectOptions{UserMetadata: um, ContentType: "application/octet-stream", DisableContentSha256: true})
		if err != nil {
			return err
		}
		s.bytesWritten.Add(int64(len(data)))
		info = Info{Key: key, Size: ui.Size, ETag: ui.ETag, LastModified: ui.LastModified,
			Checksum: sum, HasChecksum: true, Metadata: metadata}
		return nil
	})
	return info, err
}

// MaxObjectBytes bounds what Get reads: a Content-Length beyond it is an
// error, not an allocation. SIG's objects are blocks and checkpoints of a
// few to a few hundred megabytes.
const MaxObjectBytes = 4 << 30

// Get reads the whole object and verifies its checksum. A mismatch, an object
// without a checksum, or an object the server cannot read back (its own
// bitrot check fails) is ErrCorrupt.
func (s *Store) Get(ctx context.Context, key string) ([]byte, Info, error) {
	var (
		data []byte
		info Info
	)
	var sum uint32
	err := s.read(ctx, key, "get "+key, "", func(obj io.Reader, size int64, h http.Header) error {
		if size < 0 || size > MaxObjectBytes {
			return permanent(fmt.Errorf("object of %d bytes (Content-Length), at most %d are read whole", size, int64(MaxObjectBytes)))
		}
		buf := make([]byte, size)
		// Checksum each chunk as it arrives, so the CRC overlaps the
		// transfer instead of adding to it.
		var crc uint32
		if err := readChunks(obj, buf, func(lo, hi int) { crc = crc32.Update(crc, castagnoli, buf[lo:hi]) }); err != nil {
			return err
		}
		data, info, sum = buf, infoFromHeader(key, size, h), crc
		s.bytesRead.Add(int64(len(buf)))
		return nil
	})
	if err != nil {
		return nil, Info{}, err
	}
	if !info.HasChecksum {
		return nil, Info{}, fmt.Errorf("objstore: get %s/%s: no %s metadata: %w", s.cfg.Bucket, key, MetaChecksum, ErrCorrupt)
	}
	if got := sum; got != info.Checksum {
		return nil, Info{}, fmt.Errorf("objstore: get %s/%s: crc32c %08x, stored %08x: %w", s.cfg.Bucket, key, got, info.Checksum, ErrCorrupt)
	}
	return data, info, nil
}

// readChunk is the unit in which readChunks reads a body.
const readChunk = 256 << 10

// readChunks fills dst from body, readChunk bytes at a time, calling
// filled(lo, hi) once dst[lo:hi] holds them.
func readChunks(body io.Reader, dst []byte, filled func(lo, hi int)) error {
	for lo := 0; lo < len(dst); {
		hi := min(lo+readChunk, len(dst))
		if _, err := io.ReadFull(body, dst[lo:hi]); err != nil {
			return err
		}
		filled(lo, hi)
		lo = hi
	}
	return nil
}

// unreadableAttempts is how many reads in a row must fail on the body, with
// the server otherwise answering, before an object is declared unreadable.
// MinIO reports bitrot by cutting the body or answering SlowDownRead, both of
// which also happen in a transient overload; repeated failures on one object
// while Stat succeeds are not transient.
const unreadableAttempts = 4

// read runs a GET with retries (rng is its Range header, "" for the whole
// object); fn consumes the body, of size bytes (-1 if the server did not
// say). It detects objects
// the server can no longer read (see unreadableAttempts).
func (s *Store) read(ctx context.Context, key, what, rng string, fn func(body io.Reader, size int64, h http.Header) error) error {
	bodyFailures := 0
	return s.retry(ctx, what, func(ctx context.Context) error {
		r, err := s.get(ctx, key, rng)
		if err == nil {
			err = fn(r.body, r.size, r.header)
			r.body.Close()
		}
		if err == nil {
			return nil
		}
		code := minio.ToErrorResponse(err).Code
		if ctx.Err() == nil && (errors.Is(err, io.ErrUnexpectedEOF) || code == "SlowDownRead" || code == "XMinioReadQuorum") {
			bodyFailures++
			if bodyFailures >= unreadableAttempts {
				if _, serr := s.client.StatObject(ctx, s.cfg.Bucket, key, minio.StatObjectOptions{}); serr == nil {
					return permanent(fmt.Errorf("server cannot read %s/%s back after %d attempts (%v): %w", s.cfg.Bucket, key, bodyFailures, err, ErrCorrupt))
				}
			}
		} else {
			bodyFailures = 0
		}
		return err
	})
}

// GetRangeInto reads exactly len(dst) bytes at offset off into dst. The
// whole-object checksum cannot be verified on a range: the caller verifies
// what it reads. Reading past the end of the object is an error (one that
// starts at or past the end is ErrRange). dst may hold anything on entry
// (it is overwritten, never read); a retried attempt writes it again from
// the start. On error its contents are unspecified. When it returns,
// nothing writes to dst any more and filled is not called again: the
// caller may reuse both.
//
// filled, if not nil, tells the caller as the bytes arrive, so that it can
// work on them (checksum them) while they are still in the CPU's caches:
// filled(lo, hi) is called once dst[lo:hi] holds the range's bytes lo to
// hi. Within an attempt lo is the previous call's hi; every attempt starts
// again at lo = 0 (a retry rewrites dst from the start), so a caller
// accumulating state resets it when lo is 0.
//
// The caller supplies the buffer: a reader reads a unit's segments into
// buffers it recycles, and a caller that wants a new one makes it.
func (s *Store) GetRangeInto(ctx context.Context, key string, off int64, dst []byte, filled func(lo, hi int)) error {
	length := int64(len(dst))
	if off < 0 || length <= 0 {
		return fmt.Errorf("objstore: get %s: invalid range off=%d length=%d", key, off, length)
	}
	rng := "bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(off+length-1, 10)
	return s.read(ctx, key, fmt.Sprintf("get %s [%d,+%d)", key, off, length), rng, func(obj io.Reader, size int64, h http.Header) error {
		cr := h.Get("Content-Range")
		first, last, total, ok := contentRange(cr)
		if ok && total >= 0 && off+length > total {
			return permanent(fmt.Errorf("range [%d,+%d) beyond size %d", off, length, total))
		}
		// The bytes must be the ones asked for: a server (or proxy) that
		// ignores Range answers 200 with the object from its start.
		whole := cr == "" && off == 0 && size == length // a 200: the object is the range
		if !whole && (!ok || first != off || last != off+length-1 || size != length) {
			return permanent(fmt.Errorf("range [%d,+%d) asked, server sends %d bytes with Content-Range %q", off, length, size, cr))
		}
		var err error
		if filled == nil {
			_, err = io.ReadFull(obj, dst)
		} else {
			err = readChunks(obj, dst, filled)
		}
		if err != nil {
			return err
		}
		s.bytesRead.Add(length)
		return nil
	})
}

// GetFromInto reads the object from offset off to its end, a length it
// learns from the response, into a buffer from alloc (called once, with
// that length; at most max bytes are accepted). filled is as for
// GetRangeInto. It returns the buffer and the object's Info (Size is
// the whole object's). It is one request where a reader that knows where
// what it wants starts, but not where the object ends, would otherwise
// read a footer first. A retried attempt must see the same length, else
// the object changed under the read and it is an error. Like
// GetRangeInto, nothing writes to the buffer or calls alloc or filled
// after it returns.
func (s *Store) GetFromInto(ctx context.Context, key string, off, max int64, alloc func(n int) []byte, filled func(lo, hi int)) ([]byte, Info, error) {
	if off < 0 || max <= 0 {
		return nil, Info{}, fmt.Errorf("objstore: get %s: invalid range from %d (at most %d bytes)", key, off, max)
	}
	var (
		buf  []byte
		info Info
	)
	rng := "bytes=" + strconv.FormatInt(off, 10) + "-"
	err := s.read(ctx, key, fmt.Sprintf("get %s [%d:]", key, off), rng, func(obj io.Reader, size int64, h http.Header) error {
		cr := h.Get("Content-Range")
		first, last, total, ok := contentRange(cr)
		if !ok || first != off || total < 0 || last != total-1 || size != last-first+1 {
			return permanent(fmt.Errorf("bytes from %d asked, server sends %d bytes with Content-Range %q", off, size, cr))
		}
		if size > max {
			return permanent(fmt.Errorf("bytes from %d: %d of them, at most %d are read", off, size, max))
		}
		if buf == nil {
			buf = alloc(int(size))
		}
		if int64(len(buf)) != size {
			return permanent(fmt.Errorf("bytes from %d: %d of them, %d on an earlier attempt: the object changed", off, size, len(buf)))
		}
		if filled == nil {
			filled = func(int, int) {}
		}
		if err := readChunks(obj, buf, filled); err != nil {
			return err
		}
		info = infoFromHeader(key, size, h)
		info.Size = total
		s.bytesRead.Add(size)
		return nil
	})
	if err != nil {
		return nil, Info{}, err
	}
	return buf, info, nil
}

// GetSuffixInto reads the last len(dst) bytes of the object (all of it if
// it is shorter) into dst[:n] and returns n and the object's Info. Like
// GetRangeInto, it only writes dst, and not after it returns.
//
// An empty object has no suffix: S3 answers 416 (a suffix range is
// unsatisfiable only on an empty representation, RFC 9110 14.1.1), MinIO
// a 206 of no bytes with Content-Range "bytes 0--1/0". Either is n = 0 and
// an object of size 0, for the caller to judge (a block object that short
// is corrupt), not a failed read (which callers retry as an outage).
func (s *Store) GetSuffixInto(ctx context.Context, key string, dst []byte) (int, Info, error) {
	if len(dst) == 0 {
		return 0, Info{}, fmt.Errorf("objstore: get %s: invalid suffix length 0", key)
	}
	var (
		n    int
		info Info
	)
	rng := "bytes=-" + strconv.Itoa(len(dst))
	err := s.read(ctx, key, fmt.Sprintf("get %s [-%d:]", key, len(dst)), rng, func(obj io.Reader, size int64, h http.Header) error {
		// The response's length is the suffix's; the object's comes from
		// Content-Range.
		if size < 0 || size > int64(len(dst)) {
			return permanent(fmt.Errorf("suffix of %d bytes asked, server sends %d", len(dst), size))
		}
		// A 206 must end at the object's end; a 200 (no Content-Range) is
		// the whole object, shorter than the suffix asked.
		cr := h.Get("Content-Range")
		if size == 0 && strings.HasPrefix(cr, "bytes ") && strings.HasSuffix(cr, "/0") {
			info, n = infoFromHeader(key, 0, h), 0
			return nil
		}
		first, last, total, ok := contentRange(cr)
		if cr != "" && (!ok || total < 0 || last != total-1 || last-first+1 != size) {
			return permanent(fmt.Errorf("suffix of %d bytes asked, server sends %d bytes with Content-Range %q", len(dst), size, cr))
		}
		if _, err := io.ReadFull(obj, dst[:size]); err != nil {
			return err
		}
		info = infoFromHeader(key, size, h)
		if ok {
			info.Size = total
		}
		n = int(size)
		s.bytesRead.Add(size)
		return nil
	})
	if errors.Is(err, ErrRange) {
		return 0, Info{Key: key}, nil
	}
	if err != nil {
		return 0, Info{}, err
	}
	return n, info, nil
}

// contentRange parses a Content-Range of a byte range, "bytes first-last/total"
// (total -1 when the server sends "*").
func contentRange(h string) (first, last, total int64, ok bool) {
	rest, found := strings.CutPrefix(h, "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	rng, tot, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, 0, false
	}
	a, b, found := strings.Cut(rng, "-")
	if !found {
		return 0, 0, 0, false
	}
	var err1, err2 error
	first, err1 = strconv.ParseInt(a, 10, 64)
	last, err2 = strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || first < 0 || last < first {
		return 0, 0, 0, false
	}
	total = -1
	if tot != "*" {
		var err error
		if total, err = strconv.ParseInt(tot, 10, 64); err != nil || total <= last {
			return 0, 0, 0, false
		}
	}
	return first, last, total, true
}

// Stat returns the object's Info without reading it.
func (s *Store) Stat(ctx context.Context, key string) (Info, error) {
	var info Info
	err := s.retry(ctx, "stat "+key, func(ctx context.Context) error {
		oi, err := s.client.StatObject(ctx, s.cfg.Bucket, key, minio.StatObjectOptions{})
		if err != nil {
			return err
		}
		info = infoOf(oi)
		return nil
	})
	return info, err
}

// Delete removes the object. Deleting a missing object is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	return s.retry(ctx, "delete "+key, func(ctx context.Context) error {
		return s.client.RemoveObject(ctx, s.cfg.Bucket, key, minio.RemoveObjectOptions{})
	})
}

// DeleteMany deletes objects in batches of up to 1000 keys per request (S3
// multi-object delete), retrying transient failures. Deleting a missing
// object is not an error. It returns how many keys were deleted.
func (s *Store) DeleteMany(ctx context.Context, keys []string) (int, error) {
	deleted := 0
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		batch := keys[:n]
		err := s.retry(ctx, fmt.Sprintf("delete %d objects", n), func(ctx context.Context) error {
			ch := make(chan minio.ObjectInfo, n)
			for _, k := range batch {
				ch <- minio.ObjectInfo{Key: k}
			}
			close(ch)
			for re := range s.client.RemoveObjects(ctx, s.cfg.Bucket, ch, minio.RemoveObjectsOptions{}) {
				if re.Err != nil {
					return fmt.Errorf("delete %s: %w", re.ObjectName, re.Err)
				}
			}
			return nil
		})
		if err != nil {
			return deleted, err
		}
		deleted += n
		keys = keys[n:]
	}
	return deleted, nil
}

// List yields every object whose key starts with prefix, in key order. A
// transient failure part-way resumes after the last key yielded. Listings
// carry no checksum or metadata (Stat has them).
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[Info, error] {
	return func(yield func(Info, error) bool) {
		after := ""
		start := s.cfg.Clock.Now()
		var backoff time.Duration
		for {
			lctx, cancel := context.WithCancel(ctx)
			var lerr error
			for oi := range s.client.ListObjects(lctx, s.cfg.Bucket, minio.ListObjectsOptions{
				Prefix: prefix, Recursive: true, StartAfter: after}) {
				if oi.Err != nil {
					lerr = oi.Err
					break
				}
				backoff = 0
				after = oi.Key
				if !yield(Info{Key: oi.Key, Size: oi.Size, ETag: oi.ETag, LastModified: oi.LastModified}, nil) {
					cancel()
					return
				}
			}
			cancel()
			if lerr == nil {
				return
			}
			lerr = classify(ctx, lerr)
			if !isTransient(lerr) || s.cfg.Clock.Now().Sub(start) > s.cfg.RetryFor {
				yield(Info{}, fmt.Errorf("objstore: list %s/%s: %w", s.cfg.Bucket, prefix, lerr))
				return
			}
			backoff = s.nextBackoff(backoff)
			s.cfg.Logger.Warn("objstore: retrying list", "prefix", prefix, "after", after, "err", lerr, "backoff", backoff)
			if err := s.sleep(ctx, backoff); err != nil {
				yield(Info{}, fmt.Errorf("objstore: list %s/%s: %w", s.cfg.Bucket, prefix, err))
				return
			}
		}
	}
}

func infoOf(oi minio.ObjectInfo) Info {
	info := Info{Key: oi.Key, Size: oi.Size, ETag: oi.ETag, LastModified: oi.LastModified}
	for k, v := range oi.UserMetadata {
		ck := http.CanonicalHeaderKey(k)
		if ck == MetaChecksum {
			if sum, err := strconv.ParseUint(v, 16, 32); err == nil && len(v) == 8 {
				info.Checksum, info.HasChecksum = uint32(sum), true
			}
			continue
		}
		if info.Metadata == nil {
			info.Metadata = map[string]string{}
		}
		info.Metadata[ck] = v
	}
	return info
}

// permanentError marks an error that must not be retried.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

func permanent(err error) error { return permanentError{err} }

// transientError marks an error worth retrying.
type transientError struct{ err error }

func (e transientError) Error() string { return e.err.Error() }
func (e transientError) Unwrap() error { return e.err }

func isTransient(err error) bool {
	var t transientError
	return errors.As(err, &t)
}

// classify maps a minio-go or network error to ErrNotFound, a transient error,
// or a permanent one.
func classify(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var pe permanentError
	if errors.As(err, &pe) {
		return pe.err
	}
	if ctx.Err() != nil {
		// The caller's deadline or cancellation, not the server's fault.
		return err
	}
	resp := minio.ToErrorResponse(err)
	switch resp.Code {
	case "NoSuchKey", "NoSuchBucket", "NoSuchObject":
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case "SlowDown", "SlowDownRead", "SlowDownWrite", "ServiceUnavailable", "InternalError",
		"RequestTimeout", "XMinioServerNotInitialized",
		"XMinioReadQuorum", "XMinioWriteQuorum", "OperationTimedOut":
		return transientError{err}
	}
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout {
		return transientError{err}
	}
	if resp.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if resp.StatusCode == http.StatusRequestedRangeNotSatisfiable {
		return fmt.Errorf("%w: %w", ErrRange, err)
	}
	if resp.StatusCode != 0 {
		return err // another 4xx: our request is wrong; retrying will not help
	}
	// A certificate or TLS failure is configuration: retrying with the
	// same trust roots will not help (http.Client wraps these in a
	// url.Error, a net.Error, so they are told apart first).
	var (
		certErr    *tls.CertificateVerificationError
		unknownCA  x509.UnknownAuthorityError
		hostErr    x509.HostnameError
		invalidErr x509.CertificateInvalidError
		recordErr  tls.RecordHeaderError
	)
	if errors.As(err, &certErr) || errors.As(err, &unknownCA) || errors.As(err, &hostErr) ||
		errors.As(err, &invalidErr) || errors.As(err, &recordErr) {
		return err
	}
	// No S3 response: the network. Connection refused/reset, EOF, timeouts
	// (including our per-attempt deadline) are what a restarting server
	// looks like.
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, context.DeadlineExceeded) {
		return transientError{err}
	}
	return err
}

func (s *Store) nextBackoff(prev time.Duration) time.Duration {
	d := prev * 2
	if d < s.cfg.InitialBackoff {
		d = s.cfg.InitialBackoff
	}
	if d > s.cfg.MaxBackoff {
		d = s.cfg.MaxBackoff
	}
	return d
}

func (s *Store) sleep(ctx context.Context, d time.Duration) error {
	// Jitter in [d/2, d) spreads retries of many callers after an outage.
	d = d/2 + rand.N(d/2+1)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.cfg.Clock.After(d):
		return nil
	}
}

// retry runs op until it succeeds, fails permanently, or RetryFor has passed.
// Each attempt gets its own AttemptTimeout. The returned error names what was
// attempted (op) and wraps the last failure.
func (s *Store) retry(ctx context.Context, what string, op func(ctx context.Context) error) error {
	start := s.cfg.Clock.Now()
	var backoff time.Duration
	for attempt := 1; ; attempt++ {
		s.requests.Add(1)
		actx, cancel := context.WithTimeout(ctx, s.cfg.AttemptTimeout)
		err := classify(ctx, op(actx))
		cancel()
		if err == nil {
			return nil
		}
		if !isTransient(err) {
			return fmt.Errorf("objstore: %s (bucket %s): %w", what, s.cfg.Bucket, err)
		}
		if s.cfg.Clock.Now().Sub(start) >= s.cfg.RetryFor {
			return fmt.Errorf("objstore: %s (bucket %s): gave up after %d attempts in %v: %w", what, s.cfg.Bucket, attempt, s.cfg.RetryFor, err)
		}
		s.retries.Add(1)
		backoff = s.nextBackoff(backoff)
		s.cfg.Logger.Warn("objstore: retrying", "op", what, "attempt", attempt, "err", err, "backoff", backoff)
		if serr := s.sleep(ctx, backoff); serr != nil {
			return fmt.Errorf("objstore: %s: %w (last error: %v)", what, serr, err)
		}
	}
}
