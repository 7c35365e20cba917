package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/catalog"
)

func TestMain(m *testing.M) {
	code := m.Run()
	sigdtest.RemoveBuilds()
	os.Exit(code)
}

func TestWarehouseListAndGen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cat")
	c, err := catalog.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	kr := block.KafkaRange{Topic: "raw.ads", Partition: 1, First: 10, Last: 20}
	id := block.ID(1767225600000000, kr)
	v1 := block.Meta{Format: 1, Key: block.RawKey("ads", blockref.New(id, 1)), ID: id, Source: "ads",
		WindowStart: 1767225600000000, WindowLength: 3600e6, MinEventTime: 1767225600000000,
		MaxEventTime: 1767225601000000, Rows: 11, Kafka: &kr, Late: true, Generation: 2}
	if err := c.Add(v1); err != nil {
		t.Fatal(err)
	}
	v2 := v1
	v2.Version, v2.Key, v2.Rows = 2, block.RawKey("ads", blockref.New(id, 2)), 10
	v2.Changes = []block.Change{{Version: 2, Topic: "raw.ads", Partition: 1, First: 30, Last: 31, DeletedRows: 1}}
	if err := c.Add(v2); err != nil {
		t.Fatal(err)
	}
	c.Close()
	var out, errb bytes.Buffer
	if code := runMain([]string{"warehouse", "list", "--catalog", dir}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), id+"  2 ") || !strings.Contains(out.String(), "raw.ads[1] 10-20") || !strings.Contains(out.String(), "true") {
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

// TestWarehouseListLiveSigd: a running sigd holds its catalog (one process
// per Pebble store): listing its directory says the catalog is in use by
// sigd, with its pid, and points at --sigd, through which the same blocks
// are listed. Before, the listing failed with Pebble's "resource temporarily
// unavailable" and there was no other way.
func TestWarehouseListLiveSigd(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 2, RowsPerBlock: 30})
	dir := t.TempDir()
	w.Catalog(t, dir)
	tokens, toks := sigdtest.WriteTokens(t, t.TempDir())
	bin := sigdtest.BuildCommand(t, "cmd/sigd")
	p := sigdtest.StartProcess(t, bin, append([]string{"serve", "--data-dir", dir, "--listen", "127.0.0.1:0",
		"--http", "127.0.0.1:0", "--tokens", tokens, "--kafka-brokers", strings.Join(w.Kafka.Brokers, ",")}, w.S3Args()...))

	var out, errb bytes.Buffer
	code := runMain([]string{"warehouse", "list", "--catalog", filepath.Join(dir, "catalog")}, &out, &errb)
	want := fmt.Sprintf("in use by sigd (pid %d)", p.Cmd.Process.Pid)
	if code != 1 || !strings.Contains(errb.String(), want) || !strings.Contains(errb.String(), "--sigd ADDR") {
		t.Fatalf("list of a live sigd's catalog: exit %d, %q; want an error saying %q and pointing at --sigd", code, errb.String(), want)
	}
	out.Reset()
	errb.Reset()
	if code := runMain([]string{"warehouse", "list", "--sigd", p.Addr, "--token", toks["cvr"]}, &out, &errb); code != 0 {
		t.Fatalf("list through sigd: exit %d: %s", code, errb.String())
	}
	rows := map[string]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			rows[f[1]] = strings.Join(f, " ")
		}
	}
	for _, m := range w.Blocks {
		want := fmt.Sprintf("ads %s 1 30 %d %s..%s raw.ads[0] %d-%d false 0", m.ID, m.Size,
			time.UnixMicro(m.MinEventTime).UTC().Format(time.RFC3339), time.UnixMicro(m.MaxEventTime).UTC().Format(time.RFC3339),
			m.Kafka.First, m.Kafka.Last)
		if rows[m.ID] != want {
			t.Errorf("list through sigd shows block %s as %q, want %q", m.ID, rows[m.ID], want)
		}
	}
}
