package ps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/objstore"
)

// ErrNotFound is returned by a Store for a missing object.
var ErrNotFound = errors.New("ps: not found")

// Store is where a server keeps its checkpoints: whole objects, each
// written atomically (a reader sees all of it or none).
type Store interface {
	Put(ctx context.Context, key string, data []byte) error
	// Get returns the object, or an error wrapping ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	Delete(ctx context.Context, key string) error
}

// DirStore keeps checkpoints as files under a local directory: the
// development and single-machine setup (`trainer ps --data DIR`). A file is
// written to a temporary name, synced and renamed into place, and the
// directory synced, so a crash leaves the old file or the new one.
type DirStore struct{ Dir string }

func (d DirStore) path(key string) (string, error) {
	if key == "" || strings.Contains(key, "..") || filepath.IsAbs(key) {
		return "", fmt.Errorf("%w: bad checkpoint key %q", ErrInvalid, key)
	}
	return filepath.Join(d.Dir, filepath.FromSlash(key)), nil
}

// Put writes data under key.
func (d DirStore) Put(_ context.Context, key string, data []byte) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	df, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer df.Close()
	return df.Sync()
}

// Get reads key.
func (d DirStore) Get(_ context.Context, key string) ([]byte, error) {
	p, err := d.path(key)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, p)
	}
	return b, err
}

// Delete removes key; a missing file is not an error.
func (d DirStore) Delete(_ context.Context, key string) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// ObjectStore keeps checkpoints in the warehouse bucket under
// block.CheckpointKey(Pipeline, "ps/..."), next to the trainer's own
// checkpoints, so a server restarted on another machine finds them.
type ObjectStore struct {
	S        *objstore.Store
	Pipeline string
}

func (o ObjectStore) key(k string) string { return block.CheckpointKey(o.Pipeline, "ps/"+k) }

// Put writes data under key (objstore checksums it).
func (o ObjectStore) Put(ctx context.Context, key string, data []byte) error {
	_, err := o.S.Put(ctx, o.key(key), data, nil)
	return err
}

// Get reads key, verifying its checksum.
func (o ObjectStore) Get(ctx context.Context, key string) ([]byte, error) {
	b, _, err := o.S.Get(ctx, o.key(key))
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return b, err
}

// Delete removes key.
func (o ObjectStore) Delete(ctx context.Context, key string) error {
	return o.S.Delete(ctx, o.key(key))
}
