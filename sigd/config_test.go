package sigd

import (
	"strings"
	"testing"

	"github.com/sigdata/sig/warehouse/block"
)

// TestSegmentCompressionConfig: --segment-compression defaults to
// block.DefaultCompression and takes none, lz4 and zstd; anything else is
// refused before anything is opened, naming the flag.
func TestSegmentCompressionConfig(t *testing.T) {
	var c Config
	c.EnsureDefaults()
	if err := c.Validate(); err != nil || c.SegmentCompression != block.DefaultCompression.Flag() {
		t.Fatalf("default: %q, %v", c.SegmentCompression, err)
	}
	for _, v := range []string{"none", "lz4", "zstd"} {
		c := Config{SegmentCompression: v}
		c.EnsureDefaults()
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
	c = Config{SegmentCompression: "gzip"}
	c.EnsureDefaults()
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--segment-compression") {
		t.Errorf("gzip: %v", err)
	}
}
