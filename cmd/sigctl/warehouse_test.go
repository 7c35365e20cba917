package main

import (
	"bytes"
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/catalog"
)

func TestWarehouseListAndGen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cat")
	c, err := catalog.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	kr := block.KafkaRange{Topic: "raw.ads", Partition: 1, First: 10, Last: 20}
	id := block.ID(1767225600000000, kr)
	if err := c.Add(block.Meta{Format: 1, Key: block.RawKey("ads", id), ID: id, Source: "ads",
		WindowStart: 1767225600000000, WindowLength: 3600e6, MinEventTime: 1767225600000000,
		MaxEventTime: 1767225601000000, Rows: 11, Kafka: &kr, Late: true, Generation: 2}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	var out, errb bytes.Buffer
	if code := runMain([]string{"warehouse", "list", "--catalog", dir}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), id) || !strings.Contains(out.String(), "raw.ads[1] 10-20") || !strings.Contains(out.String(), "true") {
		t.Fatalf("list output:\n%s", out.String())
	}

	out.Reset()
	t.Setenv("SIG_EVENTS", "500")
	path := filepath.Join(t.TempDir(), "ev.arrow")
	if code := runMain([]string{"gen", "--out", path, "--seed", "2"}, &out, &errb); code != 0 {
		t.Fatalf("gen exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "wrote 500 events") {
		t.Fatalf("gen did not take --events from SIG_EVENTS: %s", out.String())
	}
	if code := runMain([]string{"gen", "--out", path, "--kafka-brokers", "x:1"}, &out, &errb); code != 2 {
		t.Fatalf("gen with both outputs: exit %d", code)
	}
}

// TestS3FlagsBucketAlias: the warehouse commands take the shared
// --s3-bucket and, as before, --bucket for the same setting.
func TestS3FlagsBucketAlias(t *testing.T) {
	for _, args := range [][]string{{"--s3-bucket", "wh"}, {"--bucket", "wh"}} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		var f s3Flags
		f.register(fs)
		if err := fs.Parse(append([]string{"--s3-endpoint", "h:1"}, args...)); err != nil {
			t.Fatal(err)
		}
		if f.cfg.Bucket != "wh" || f.cfg.Endpoint != "h:1" {
			t.Errorf("%v: bucket %q, endpoint %q", args, f.cfg.Bucket, f.cfg.Endpoint)
		}
	}
}
