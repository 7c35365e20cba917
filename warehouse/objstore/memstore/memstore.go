package memstore

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sigdata/sig/warehouse/objstore"
)

// chunk is the size in which reads report bytes to filled: not
// objstore.Store's, and not a power of two.
const chunk = 48<<10 + 7

// Store is a bucket in memory. The zero value is not usable; call New.
// It is safe for concurrent use.
type Store struct {
	mu      sync.Mutex
	objects map[string]*object
	puts    int64 // names each Put's ETag
}

// object is a stored object; never modified once stored (Put replaces it).
type object struct {
	data     []byte
	sum      uint32
	metadata map[string]string // canonical header keys; nil when none
	etag     string
	modified time.Time
}

// New returns an empty bucket.
func New() *Store { return &Store{objects: map[string]*object{}} }

var (
	_ objstore.Reader = (*Store)(nil)
	_ objstore.Writer = (*Store)(nil)
)

func (o *object) info(key string) objstore.Info {
	return objstore.Info{Key: key, Size: int64(len(o.data)), ETag: o.etag, LastModified: o.modified,
		Checksum: o.sum, HasChecksum: true, Metadata: o.metadata}
}

// lookup returns the object at key, or an error wrapping ErrNotFound (or
// the context's) naming what was attempted.
func (s *Store) lookup(ctx context.Context, what, key string) (*object, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: %s %s: %w", what, key, err)
	}
	s.mu.Lock()
	o := s.objects[key]
	s.mu.Unlock()
	if o == nil {
		return nil, fmt.Errorf("memstore: %s %s: %w", what, key, objstore.ErrNotFound)
	}
	return o, nil
}

// Put stores a copy of data under key with its CRC-32C (objstore.Store.Put).
func (s *Store) Put(ctx context.Context, key string, data []byte, metadata map[string]string) (objstore.Info, error) {
	return s.PutChecksummed(ctx, key, data, objstore.Checksum(data), metadata)
}

// PutChecksummed stores a copy of data with sum as its checksum, which Get
// then checks (objstore.Store.PutChecksummed).
func (s *Store) PutChecksummed(ctx context.Context, key string, data []byte, sum uint32, metadata map[string]string) (objstore.Info, error) {
	if err := ctx.Err(); err != nil {
		return objstore.Info{}, fmt.Errorf("memstore: put %s: %w", key, err)
	}
	if key == "" {
		return objstore.Info{}, errors.New("memstore: put: empty key")
	}
	var meta map[string]string
	for k, v := range metadata {
		ck := http.CanonicalHeaderKey(k)
		if ck == objstore.MetaChecksum {
			return objstore.Info{}, fmt.Errorf("memstore: put %s: metadata key %s is reserved", key, k)
		}
		if meta == nil {
			meta = make(map[string]string, len(metadata))
		}
		meta[ck] = v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.puts++
	o := &object{data: slices.Clone(data), sum: sum, metadata: meta,
		etag: fmt.Sprintf("%08x-%d", sum, s.puts), modified: time.Now().UTC()}
	if o.data == nil {
		o.data = []byte{}
	}
	s.objects[key] = o
	info := o.info(key)
	info.Metadata = metadata // as given, as objstore.Store.Put returns it
	return info, nil
}

// Get returns a copy of the object, verifying its checksum.
func (s *Store) Get(ctx context.Context, key string) ([]byte, objstore.Info, error) {
	o, err := s.lookup(ctx, "get", key)
	if err != nil {
		return nil, objstore.Info{}, err
	}
	if got := objstore.Checksum(o.data); got != o.sum {
		return nil, objstore.Info{}, fmt.Errorf("memstore: get %s: crc32c %08x, stored %08x: %w", key, got, o.sum, objstore.ErrCorrupt)
	}
	return slices.Clone(o.data), o.info(key), nil
}

// fill copies src into dst, reporting each chunk to filled (if not nil).
func fill(dst, src []byte, filled func(lo, hi int)) {
	for lo := 0; lo < len(dst); {
		hi := min(lo+chunk, len(dst))
		copy(dst[lo:hi], src[lo:hi])
		if filled != nil {
			filled(lo, hi)
		}
		lo = hi
	}
}

// GetRangeInto reads exactly len(dst) bytes at off into dst
// (objstore.Store.GetRangeInto).
func (s *Store) GetRangeInto(ctx context.Context, key string, off int64, dst []byte, filled func(lo, hi int)) error {
	length := int64(len(dst))
	if off < 0 || length <= 0 {
		return fmt.Errorf("memstore: get %s: invalid range off=%d length=%d", key, off, length)
	}
	o, err := s.lookup(ctx, "get", key)
	if err != nil {
		return err
	}
	size := int64(len(o.data))
	if off >= size {
		return fmt.Errorf("memstore: get %s [%d,+%d): object of %d bytes: %w", key, off, length, size, objstore.ErrRange)
	}
	if off+length > size {
		return fmt.Errorf("memstore: get %s: range [%d,+%d) beyond size %d", key, off, length, size)
	}
	fill(dst, o.data[off:off+length], filled)
	return nil
}

// GetFromInto reads the object from off to its end into a buffer from
// alloc (objstore.Store.GetFromInto).
func (s *Store) GetFromInto(ctx context.Context, key string, off, max int64, alloc func(n int) []byte, filled func(lo, hi int)) ([]byte, objstore.Info, error) {
	if off < 0 || max <= 0 {
		return nil, objstore.Info{}, fmt.Errorf("memstore: get %s: invalid range from %d (at most %d bytes)", key, off, max)
	}
	o, err := s.lookup(ctx, "get", key)
	if err != nil {
		return nil, objstore.Info{}, err
	}
	size := int64(len(o.data))
	if off >= size {
		return nil, objstore.Info{}, fmt.Errorf("memstore: get %s [%d:]: object of %d bytes: %w", key, off, size, objstore.ErrRange)
	}
	if n := size - off; n > max {
		return nil, objstore.Info{}, fmt.Errorf("memstore: get %s: bytes from %d: %d of them, at most %d are read", key, off, n, max)
	}
	buf := alloc(int(size - off))
	if int64(len(buf)) != size-off {
		return nil, objstore.Info{}, fmt.Errorf("memstore: get %s: buffer of %d bytes for %d", key, len(buf), size-off)
	}
	fill(buf, o.data[off:], filled)
	return buf, o.info(key), nil
}

// GetSuffixInto reads the last len(dst) bytes of the object (all of it if
// shorter) into dst (objstore.Store.GetSuffixInto).
func (s *Store) GetSuffixInto(ctx context.Context, key string, dst []byte) (int, objstore.Info, error) {
	if len(dst) == 0 {
		return 0, objstore.Info{}, fmt.Errorf("memstore: get %s: invalid suffix length 0", key)
	}
	o, err := s.lookup(ctx, "get", key)
	if err != nil {
		return 0, objstore.Info{}, err
	}
	n := min(len(dst), len(o.data))
	copy(dst, o.data[len(o.data)-n:])
	return n, o.info(key), nil
}

// Stat returns the object's Info.
func (s *Store) Stat(ctx context.Context, key string) (objstore.Info, error) {
	o, err := s.lookup(ctx, "stat", key)
	if err != nil {
		return objstore.Info{}, err
	}
	return o.info(key), nil
}

// Delete removes the object; a missing one is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	_, err := s.DeleteMany(ctx, []string{key})
	return err
}

// DeleteMany removes the objects; missing ones are not an error. It returns
// how many keys it was given, as objstore.Store.DeleteMany does.
func (s *Store) DeleteMany(ctx context.Context, keys []string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("memstore: delete %d objects: %w", len(keys), err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		delete(s.objects, k)
	}
	return len(keys), nil
}

// List yields the objects whose key starts with prefix, in key order, as
// they were when it started; like objstore.Store's listings, without
// checksum or metadata.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[objstore.Info, error] {
	return func(yield func(objstore.Info, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(objstore.Info{}, fmt.Errorf("memstore: list %s: %w", prefix, err))
			return
		}
		s.mu.Lock()
		var infos []objstore.Info
		for k, o := range s.objects {
			if strings.HasPrefix(k, prefix) {
				infos = append(infos, objstore.Info{Key: k, Size: int64(len(o.data)), ETag: o.etag, LastModified: o.modified})
			}
		}
		s.mu.Unlock()
		slices.SortFunc(infos, func(a, b objstore.Info) int { return strings.Compare(a.Key, b.Key) })
		for _, info := range infos {
			if !yield(info, nil) {
				return
			}
		}
	}
}
