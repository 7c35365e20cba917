package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sigdata/sig/internal/cli"
)

func init() {
	registerRemote(remote{name: "read", flags: readFlags,
		usage: "--client C --pipeline P --readers A,B [--out DIR] [--range FROM:TO] [--batch-rows N] [--mode memo|local|ready-else-local]: read a pipeline's units through the readers with the Go client and write every batch as it arrived (DIR/unit-NNNN/batch-NNNNN.arrows, Arrow IPC streams); without --out only count them (examples/s)"})
}

// readFlags: sigctl read resolves the pipeline's read solution at sigd, cuts
// it into units (reader.UnitsFromSolution) and reads each through
// reader.Client, writing every batch's arrow_ipc bytes, a complete Arrow
// IPC stream, to its own file: what a Go trainer host receives, for other
// clients (the Python client's tests) to compare with, and for any Arrow
// tool to open; without --out it reads and decodes them only, a measure of
// the Go client (bench/python.sh). The token (--token) must be valid at
// sigd and the readers.
func readFlags(fs *flag.FlagSet) func(s *session, pos []string) error {
	client := fs.String("client", "", "the pipeline's client (required)")
	pipeline := fs.String("pipeline", "", "the pipeline (required)")
	rng := fs.String("range", "", "event range FROM:TO (empty: the range of the pipeline's last submit)")
	var readers cli.List
	fs.Var(&readers, "readers", "reader addresses, comma-separated (required)")
	out := fs.String("out", "", "directory to write the batches into (created; empty: write nothing)")
	batchRows := fs.Int("batch-rows", 0, "rows per batch (0: the reader's 4096)")
	mode := fs.String("mode", "memo", "memo (every input from its memo object), local (computed from raw blocks) or ready-else-local")
	return func(s *session, pos []string) error {
		if err := cli.NoArgs(pos); err != nil {
			return err
		}
		if *client == "" || *pipeline == "" || len(readers) == 0 {
			return fmt.Errorf("%w: --client, --pipeline and --readers are required", cli.ErrUsage)
		}
		units, err := pipelineUnits(s, *client, *pipeline, *rng, *mode, *batchRows)
		if err != nil {
			return err
		}
		rc, err := readerClient(s, readers)
		if err != nil {
			return err
		}
		defer rc.Close()
		var rows, batches int64
		start := time.Now()
		cpu0, cpuOK := processCPU()
		for i, u := range units {
			dir := filepath.Join(*out, fmt.Sprintf("unit-%04d", i))
			if *out != "" {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, "block"), []byte(u.BlockId+"\n"), 0o644); err != nil {
					return err
				}
			}
			n := 0
			for b, err := range rc.ReadBatches(s.ctx, u) {
				if err != nil {
					return err
				}
				if *out != "" {
					if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("batch-%05d.arrows", n)), b.IPC, 0o644); err != nil {
						return err
					}
				}
				n++
				rows += b.Record.NumRows()
			}
			batches += int64(n)
		}
		el := time.Since(start)
		cpu := ""
		if cpu1, ok := processCPU(); ok && cpuOK && rows > 0 {
			// The whole process's, the reading goroutines' and gRPC's.
			cpu = fmt.Sprintf(", %.0f cpu-ns/example", float64(cpu1-cpu0)/float64(rows))
		}
		into := ""
		if *out != "" {
			into = " into " + *out
		}
		fmt.Fprintf(s.stdout, "read %d units, %d batches, %d rows in %.3fs (%.0f examples/s%s)%s\n",
			len(units), batches, rows, el.Seconds(), float64(rows)/el.Seconds(), cpu, into)
		return nil
	}
}
