package pebbleutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// quietLogger keeps Pebble's informational output off stderr; errors that
// stop Pebble still stop the process, with the message.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pebble: "+format+"\n", args...)
	panic(fmt.Sprintf("pebble: "+format, args...))
}

// Durability says which crashes an acknowledged write survives.
type Durability uint8

const (
	// DurabilityProcess (the default): every write reaches the kernel before
	// it is acknowledged, so it survives a crash of the process (SIGKILL,
	// panic, OOM kill) but not of the machine. The WAL is not fsynced.
	DurabilityProcess Durability = iota
	// DurabilityMachine: every write is fsynced before it is acknowledged,
	// so it also survives power loss; concurrent writers share an fsync.
	DurabilityMachine
)

func (d Durability) String() string {
	switch d {
	case DurabilityProcess:
		return "process"
	case DurabilityMachine:
		return "machine"
	}
	return fmt.Sprintf("Durability(%d)", uint8(d))
}

// WriteOptions is what every write of a store opened by Open uses.
//
// Why always Sync: Pebble's WAL writer keeps pebble.NoSync records in a
// userspace buffer until a 32 KiB block fills or a sync is requested
// (record.LogWriter), so a NoSync write acknowledged a moment before SIGKILL
// can vanish (workers' TestSIGKILLLosesNothing saw hundreds). So every write
// requests a sync, and with DurabilityProcess the WAL files' Sync is a no-op:
// Pebble write(2)s the record to the kernel and acknowledges it without
// waiting for the disk. Only WAL files are wrapped; sstables and the
// MANIFEST keep real fsyncs, so Pebble's own recovery invariants hold.
var WriteOptions = pebble.Sync

// Open opens (creating if needed) the Pebble database in dir with the given
// durability. opts may be nil; its Logger and FS are set here.
func Open(dir string, d Durability, opts *pebble.Options) (*pebble.DB, error) {
	if opts == nil {
		opts = &pebble.Options{}
	}
	opts.Logger = quietLogger{}
	if d == DurabilityProcess {
		opts.FS = walNoSyncFS{vfs.Default}
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		// Pebble locks its directory (a POSIX lock on LOCK) and says only
		// "resource temporarily unavailable" when another process holds it.
		if pid, ok := lockHolder(filepath.Join(dir, "LOCK")); ok {
			return nil, &LockedError{Dir: dir, PID: pid, Err: err}
		}
		return nil, fmt.Errorf("open pebble %s: %w", dir, err)
	}
	return db, nil
}

// ErrLocked is the error (errors.Is) of opening a store another process
// has open: a Pebble store has one process at a time.
var ErrLocked = errors.New("in use by another process")

// LockedError is Open's error for a store another process has open.
type LockedError struct {
	Dir string
	// PID is the process holding the store; 0 if not known.
	PID int
	Err error // Pebble's
}

func (e *LockedError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("pebble store %s is in use by process %d", e.Dir, e.PID)
	}
	return fmt.Sprintf("pebble store %s is in use by another process", e.Dir)
}

func (e *LockedError) Unwrap() []error { return []error{ErrLocked, e.Err} }

// walNoSyncFS hands out WAL files whose Sync only reaches the kernel.
type walNoSyncFS struct{ vfs.FS }

func isWAL(name string) bool { return strings.HasSuffix(name, ".log") }

func (fs walNoSyncFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !isWAL(name) {
		return f, err
	}
	return walNoSyncFile{f}, nil
}

func (fs walNoSyncFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs walNoSyncFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrap(newname, f, err)
}

func (fs walNoSyncFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, o ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, o...)
	return fs.wrap(name, f, err)
}

func (fs walNoSyncFS) Unwrap() vfs.FS { return fs.FS }

type walNoSyncFile struct{ vfs.File }

func (walNoSyncFile) Sync() error                             { return nil }
func (walNoSyncFile) SyncData() error                         { return nil }
func (walNoSyncFile) SyncTo(int64) (fullSync bool, err error) { return true, nil }

// PrefixEnd returns the smallest key greater than every key with the
// prefix, for an iterator's UpperBound (nil when there is none).
func PrefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}

// Get returns a copy of the value of key, or ok=false when it is absent.
func Get(r pebble.Reader, key []byte) (val []byte, ok bool, err error) {
	v, closer, err := r.Get(key)
	if err == pebble.ErrNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	val = append([]byte(nil), v...)
	closer.Close()
	return val, true, nil
}

// Scan calls f for every key with the prefix, in order, until f returns
// false or an error. Keys and values are only valid during the call.
func Scan(r pebble.Reader, prefix []byte, f func(key, val []byte) (bool, error)) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: PrefixEnd(prefix)})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return err
		}
		cont, err := f(it.Key(), v)
		if err != nil {
			it.Close()
			return err
		}
		if !cont {
			break
		}
	}
	return it.Close()
}
