package ps

import (
	"context"
	"strings"
	"testing"

	"github.com/sigdata/sig/internal/devenv"
	"github.com/sigdata/sig/warehouse/objstore"
)

// TestObjectStoreCheckpoints keeps the shards' checkpoints in a real MinIO
// bucket under checkpoints/<pipeline>/ps/: servers started afresh on the
// bucket come back at the checkpoint's step with the same embeddings, and
// checkpoints beyond Keep are deleted from the bucket.
func TestObjectStoreCheckpoints(t *testing.T) {
	ctx := context.Background()
	m := devenv.NewMinIO(t)
	s := m.NewStore(t, objstore.Config{Bucket: "warehouse"})
	stores := []Store{ObjectStore{S: s, Pipeline: "ctr"}, ObjectStore{S: s, Pipeline: "ctr"}}
	tables := testTables()
	cl := startCluster(t, 2, stores)
	for i := range cl.servers {
		cl.servers[i].cfg.Keep = 2
	}
	c, err := NewClient(ctx, cl.conns, ClientConfig{Tables: tables, Stacking: true, Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	for step := 1; step <= 3; step++ {
		b, g := genStep(tables, 2, step)
		f, err := c.Lookup(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Apply(ctx, f, g); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := readAll(t, c, 2)
	var keys []string
	for info, err := range s.List(ctx, "checkpoints/ctr/ps/") {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, info.Key)
	}
	// Two shards × (manifest + the 2 retained data objects).
	if len(keys) != 6 || strings.Contains(strings.Join(keys, " "), "step-000000000001") {
		t.Fatalf("bucket holds %v, want each shard's manifest and steps 2 and 3", keys)
	}
	cl2 := startCluster(t, 2, stores)
	c2, err := NewClient(ctx, cl2.conns, ClientConfig{Tables: tables, Stacking: true, Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	if c2.Step() != 3 {
		t.Fatalf("restored at step %d, want 3", c2.Step())
	}
	if err := sameBits(readAll(t, c2, 2), want); err != nil {
		t.Fatal(err)
	}
}
