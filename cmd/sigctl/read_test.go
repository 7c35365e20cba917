package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/sigdata/sig/reader"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
)

// TestReadCommand: against a real sigd and a real reader over gRPC, sigctl
// read writes every batch of every unit of the pipeline's read solution as
// its own Arrow IPC stream, unit by unit in event order, and the bytes are
// what reader.Client receives for the same units (the reference the Python
// client's tests compare with). Usage errors exit 2; a token of another
// client is refused by sigd (exit 1).
func TestReadCommand(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 2, RowsPerBlock: 300, Seed: 5})
	srv := sigdtest.Start(t, w, sigd.Config{WorkersMin: 1, WorkersMax: 1}, sigd.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctr := srv.SIG(t, "ctr")
	if _, err := ctr.SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 5,
		`input q = hash(unigrams(lower(col("query"))), buckets=100)`+"\n"+`input a = hash(col("advertiser_id"), buckets=50)`, w.All())); err != nil {
		t.Fatal(err)
	}
	sol := sigdtest.WaitComplete(ctx, t, ctr, "ctr", "p")

	r, err := reader.NewServer(reader.Config{Store: srv.Store(), Tokens: srv.Server.Tokens()})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := r.GRPCServer()
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	addr := lis.Addr().String()

	conn := []string{"--sigd", srv.Addr(), "--token", srv.Tokens["trainer"]}
	out := filepath.Join(t.TempDir(), "batches")
	for _, args := range [][]string{
		{"--pipeline", "p", "--readers", addr, "--out", out}, // no client
		{"--client", "ctr", "--pipeline", "p", "--out", out}, // no readers
		{"--client", "ctr", "--readers", addr},               // no pipeline
		{"--client", "ctr", "--pipeline", "p", "--readers", addr, "--out", out, "--mode", "lig"},
		{"--client", "ctr", "--pipeline", "p", "--readers", addr, "--out", out, "extra"},
	} {
		if code, _, errs := sigctl(t, append(append([]string{"read"}, conn...), args...)...); code != 2 {
			t.Errorf("read %q: exit %d, want 2 (%s)", args, code, errs)
		}
	}
	if code, _, errs := sigctl(t, "read", "--sigd", srv.Addr(), "--token", srv.Tokens["cvr"], "--client", "ctr",
		"--pipeline", "p", "--readers", addr, "--out", out); code != 1 || !strings.Contains(errs, "PermissionDenied") {
		t.Errorf("another client's token: exit %d: %s", code, errs)
	}

	code, stdout, errs := sigctl(t, append([]string{"read", "--client", "ctr", "--pipeline", "p", "--readers", addr,
		"--out", out, "--batch-rows", "128"}, conn...)...)
	if code != 0 {
		t.Fatalf("read: exit %d: %s", code, errs)
	}
	if !strings.Contains(stdout, "read 2 units, 6 batches, 600 rows") {
		t.Errorf("read output: %s", stdout)
	}

	// Without --out: read and counted only.
	if code, stdout, errs := sigctl(t, append([]string{"read", "--client", "ctr", "--pipeline", "p", "--readers", addr,
		"--batch-rows", "100"}, conn...)...); code != 0 || !strings.Contains(stdout, "read 2 units, 6 batches, 600 rows") ||
		strings.Contains(stdout, " into ") {
		t.Errorf("read without --out: exit %d (%s): %s", code, errs, stdout)
	}

	units, err := reader.UnitsFromSolution(sol, reader.UnitOptions{BatchRows: 128})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := reader.NewClient(reader.ClientConfig{Addresses: []string{addr}, Token: srv.Tokens["trainer"]})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	for i, u := range units {
		dir := filepath.Join(out, fmt.Sprintf("unit-%04d", i))
		if b, err := os.ReadFile(filepath.Join(dir, "block")); err != nil || string(b) != u.BlockId+"\n" {
			t.Errorf("unit %d: block file %q (%v), want %s", i, b, err, u.BlockId)
		}
		n := 0
		for b, err := range rc.ReadBatches(ctx, u) {
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("batch-%05d.arrows", n)))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, b.IPC) {
				t.Errorf("unit %d batch %d: %d bytes differ from the client's %d", i, n, len(got), len(b.IPC))
			}
			// Each file is a complete Arrow IPC stream any Arrow reader opens.
			rd, err := ipc.NewReader(bytes.NewReader(got))
			if err != nil {
				t.Fatalf("unit %d batch %d: %v", i, n, err)
			}
			if !rd.Next() || rd.Record().NumRows() != b.Record.NumRows() {
				t.Errorf("unit %d batch %d: not one record of %d rows", i, n, b.Record.NumRows())
			}
			rd.Release()
			n++
		}
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("batch-%05d.arrows", n))); !os.IsNotExist(err) {
			t.Errorf("unit %d: more batch files than the client's %d batches", i, n)
		}
	}
}
