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
