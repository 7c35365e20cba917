package randid

import (
	"encoding/hex"
	"testing"
)

// TestHex: n bytes in hex, and two calls differ.
func TestHex(t *testing.T) {
	a, b := Hex(16), Hex(16)
	if len(a) != 32 || a == b {
		t.Fatalf("Hex(16): %q, %q", a, b)
	}
	if _, err := hex.DecodeString(a); err != nil {
		t.Fatalf("Hex(16) = %q: %v", a, err)
	}
}
