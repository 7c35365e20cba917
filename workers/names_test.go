package workers

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/sigdata/sig/canon"
)

// The tests name components with short words ("t1", "bad", "ghost") so that
// scripts and expected outputs stay readable. nameKey makes a name a
// component key: the name's bytes, zero-padded, so keys sort as their names
// do; keyName prints one back.
func nameKey(name string) canon.Key {
	var k canon.Key
	if len(name) > len(k) || bytes.IndexByte([]byte(name), 0) >= 0 {
		panic(fmt.Sprintf("test component name %q: more than %d bytes or a NUL", name, len(k)))
	}
	copy(k[:], name)
	return k
}

func keyName(k canon.Key) string { return string(bytes.TrimRight(k[:], "\x00")) }

// idName prints a task id with its component's test name.
func idName(id TaskID) string { return keyName(id.Component) + "/" + id.Block.String() }

// numKey is a distinct component key per i >= 0, for tests that need many:
// i+1 in its last bytes (the zero key is no component's).
func numKey(i int) canon.Key {
	var k canon.Key
	binary.BigEndian.PutUint64(k[len(k)-8:], uint64(i)+1)
	return k
}
