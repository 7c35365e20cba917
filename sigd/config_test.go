package sigd

import (
	"strings"
	"testing"

	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/workers"
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

// TestWorkerBatchTasksConfig: --worker-batch-tasks defaults to
// DefaultWorkerBatchTasks, takes 1 (no batches) to workers.MaxBatchTasks,
// and refuses the rest naming the flag.
func TestWorkerBatchTasksConfig(t *testing.T) {
	var c Config
	c.EnsureDefaults()
	if err := c.Validate(); err != nil || c.WorkerBatchTasks != DefaultWorkerBatchTasks {
		t.Fatalf("default: %d, %v", c.WorkerBatchTasks, err)
	}
	for _, n := range []int{1, 2, workers.MaxBatchTasks} {
		c := Config{WorkerBatchTasks: n}
		c.EnsureDefaults()
		if err := c.Validate(); err != nil || c.WorkerBatchTasks != n {
			t.Errorf("%d: %d, %v", n, c.WorkerBatchTasks, err)
		}
	}
	for _, n := range []int{-1, workers.MaxBatchTasks + 1} {
		c := Config{WorkerBatchTasks: n}
		c.EnsureDefaults()
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--worker-batch-tasks") {
			t.Errorf("%d: %v", n, err)
		}
	}
}
