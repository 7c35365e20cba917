// Package pebbleutil holds what every Pebble store of the project shares:
// opening a database without Pebble writing to stderr, and prefix scans.
package pebbleutil

import (
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2"
)

// quietLogger keeps Pebble's informational output off stderr; errors that
// stop Pebble still stop the process, with the message.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pebble: "+format+"\n", args...)
	os.Exit(2)
}

// Open opens (creating if needed) the Pebble database in dir. opts may be
// nil; its Logger is always replaced by the quiet logger.
func Open(dir string, opts *pebble.Options) (*pebble.DB, error) {
	if opts == nil {
		opts = &pebble.Options{}
	}
	opts.Logger = quietLogger{}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("open pebble %s: %w", dir, err)
	}
	return db, nil
}

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
