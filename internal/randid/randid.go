// Package randid makes the project's random names: session ids and CSRF
// tokens of the operator console, audit ids, generated tokens and
// credentials, and the ids of a controller's run or a checkpoint's save.
// All are crypto/rand bytes in hex, so that none can be guessed and all
// read the same in logs.
package randid

import (
	"crypto/rand"
	"encoding/hex"
)

// Hex returns n random bytes in hex (2n characters).
func Hex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand.Read)
	return hex.EncodeToString(b)
}
