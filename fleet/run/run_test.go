package run_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"github.com/sigdata/sig/fleet/gen"
	"github.com/sigdata/sig/fleet/results"
	"github.com/sigdata/sig/fleet/run"
	"github.com/sigdata/sig/sigd/sigdtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	sigdtest.RemoveBuilds()
	os.Exit(code)
}

// TestFleetAccounting is the "What must show": a reduced fleet run
// end to end on real processes (sigd dev with MinIO and kfake, a sigd
// worker, two readers), and sigd's hit and reuse accounting asserted
// against counts made from the submissions themselves:
//
//   - submission by submission, sigd's component and block hits against
//     the Ledger's count over the pipelines' canonical keys and the
//     catalog's blocks (fleet/run does it as it runs; here it is checked
//     from the steps it recorded);
//   - epoch by epoch, and the final reuse histogram, against the fleet's
//     plan counted here from the spec alone (component names, slots for
//     blocks: no canonicalization, no catalog);
//   - examples read against the spec's ranges, and every unit read in
//     SIG and LIG mode with identical bytes (the run fails otherwise);
//   - the object store's traffic counted for every phase, by side, within
//     what MinIO served in all, and priced.
func TestFleetAccounting(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	fleet := gen.Config{Seed: 3, Pipelines: 12, Clients: 4, Epochs: 3, FirstEpoch: 4, InputsMin: 2, InputsMax: 5,
		HistoryMin: 1, HistoryMax: 3, RetireRate: 0.3}
	const rows, perSlot = 500, 2
	res, err := run.Run(ctx, run.Config{Fleet: fleet, RowsPerBlock: rows, BlocksPerSlot: perSlot,
		SigdBin: sigdtest.BuildCommand(t, "cmd/sigd"), ReaderBin: sigdtest.BuildCommand(t, "cmd/reader"),
		Progress: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Checks {
		if !c.OK {
			t.Errorf("check failed: %s: %s", c.Name, c.Detail)
		}
	}

	f, err := gen.Generate(fleet)
	if err != nil {
		t.Fatal(err)
	}
	steps := f.Steps()
	if len(res.Steps) != len(steps) {
		t.Fatalf("%d steps recorded, the fleet has %d", len(res.Steps), len(steps))
	}
	var examples int64
	for i, s := range res.Steps {
		if s.Sigd != s.Ledger {
			t.Errorf("step %d (%s, epoch %d): sigd answered %+v, the Ledger counts %+v", i, s.Pipeline, s.Epoch, s.Sigd, s.Ledger)
		}
		want := int64(steps[i].To-steps[i].ReadFrom) * perSlot * rows
		if s.Examples != want {
			t.Errorf("step %d read %d examples, its range holds %d", i, s.Examples, want)
		}
		examples += want
	}

	// The plan, counted here from the spec alone.
	plan := f.Plan()
	for i, e := range res.Epochs {
		pe := plan.Epochs[i]
		for _, c := range []struct {
			name string
			got  results.Counts
			want gen.Count
		}{{"initial", e.Initial, pe.Initial}, {"caught-up", e.CaughtUp, pe.CaughtUp}} {
			w := results.Counts{Components: c.want.Components, ComponentHits: c.want.ComponentHits,
				Blocks: perSlot * c.want.Blocks, BlockHits: perSlot * c.want.BlockHits}
			if c.got != w {
				t.Errorf("epoch %d %s: sigd answered %+v, the plan counts %+v", e.Epoch, c.name, c.got, w)
			}
		}
	}
	var want []int64
	for _, n := range plan.Reuse {
		want = append(want, perSlot*n)
	}
	if fmt.Sprint(res.Reuse.Sigd.Histogram) != fmt.Sprint(want) {
		t.Errorf("sigd's reuse histogram %v, the plan's %v", res.Reuse.Sigd.Histogram, want)
	}
	if res.Reuse.Sigd.Mean != plan.ReuseMean || res.Reuse.Sigd.Max != plan.ReuseMax {
		t.Errorf("sigd's reuse mean %v max %d, the plan's %v %d", res.Reuse.Sigd.Mean, res.Reuse.Sigd.Max, plan.ReuseMean, plan.ReuseMax)
	}
	if last := res.Epochs[len(res.Epochs)-1]; last.ReuseMean != plan.ReuseMean {
		t.Errorf("the last epoch's Stats reuse mean %v, the plan's %v", last.ReuseMean, plan.ReuseMean)
	}

	// Every figure measured: each process used CPU, and both sides read
	// every example.
	c := res.CPU
	if c.Examples != examples || c.Worker <= 0 || c.SIGReader <= 0 || c.LIGReader <= 0 || c.Sigd <= 0 || c.MinIO <= 0 {
		t.Errorf("cpu %+v, want every process's CPU and %d examples", c, examples)
	}
	// MinIO's CPU split by the phase that caused it: each side used
	// storage, and the parts are within the whole.
	if c.MinIOWorker <= 0 || c.MinIOSIGReader <= 0 || c.MinIOLIGReader <= 0 || c.MinIOWorker+c.MinIOSIGReader+c.MinIOLIGReader > c.MinIO {
		t.Errorf("MinIO's CPU %v split as workers %v, SIG reader %v, LIG reader %v", c.MinIO, c.MinIOWorker, c.MinIOSIGReader, c.MinIOLIGReader)
	}
	// The object store's traffic, by side: the workers wrote memo objects,
	// both readers read, every step's phases are counted, and the sides
	// are within what the store served in all.
	st := res.Store
	if st == nil {
		t.Fatal("no object-store traffic recorded")
	}
	var units int
	for _, p := range res.Pipelines {
		units += p.Initial.Units + p.CaughtUp.Units
	}
	if st.Units != units || st.Units == 0 || st.Examples != examples {
		t.Errorf("store: %d units and %d examples, the pipelines read %d units and %d examples", st.Units, st.Examples, units, examples)
	}
	for i, s := range res.Steps {
		if s.Store == nil || s.Units == 0 {
			t.Errorf("step %d: no traffic or units (%+v, %d)", i, s.Store, s.Units)
		}
	}
	sides := st.Worker.Add(st.SIGReader).Add(st.LIGReader)
	// Readers only read: a PUT among theirs is a phase mislabelled.
	if st.Worker.Kind(results.PUT) == 0 || st.SIGReader.Kind(results.PUT) != 0 || st.LIGReader.Kind(results.PUT) != 0 ||
		st.SIGReader.Kind(results.GET) == 0 || st.LIGReader.Kind(results.GET) == 0 ||
		st.SIGReader.SentBytes == 0 || st.LIGReader.SentBytes == 0 || st.Worker.ReceivedBytes == 0 ||
		sides.Total() > st.Whole.Total() || sides.Bytes() > st.Whole.Bytes() {
		t.Errorf("store: workers %+v, SIG reader %+v, LIG reader %+v, whole %+v", st.Worker, st.SIGReader, st.LIGReader, st.Whole)
	}
	t.Logf("requests per unit: SIG reader %.2f (%v), LIG reader %.2f (%v); MinIO fit %+v", st.PerUnit(st.SIGReader), st.SIGReader.ByAPI,
		st.PerUnit(st.LIGReader), st.LIGReader.ByAPI, st.Fit)
	// The readers' wanted bytes: the SIG reader read memo objects, the
	// LIG reader none, and neither wanted more than the store sent it.
	if rs := st.Readers; rs == nil || rs.SIG.WantedRaw <= 0 || rs.SIG.WantedMemo <= 0 || rs.LIG.WantedRaw <= 0 || rs.LIG.WantedMemo != 0 ||
		rs.SIG.Wanted() > st.SIGReader.SentBytes || rs.LIG.Wanted() > st.LIGReader.SentBytes {
		t.Errorf("readers' counts %+v; sent SIG reader %d, LIG reader %d", rs, st.SIGReader.SentBytes, st.LIGReader.SentBytes)
	} else {
		// The readers' own request counts are about the store's (each
		// side does one thing at a time; the reader counts a request as
		// it makes it, MinIO once it has served it and updated its
		// counters, so a phase's last few may fall on either side).
		for _, side := range []struct {
			name string
			c    results.ReaderCounts
			q    results.Requests
		}{{"SIG", rs.SIG, st.SIGReader}, {"LIG", rs.LIG, st.LIGReader}} {
			var n, fetched int64
			for _, v := range side.c.Requests {
				n += v
			}
			for _, v := range side.c.Fetched {
				fetched += v
			}
			// (As with the requests above: a phase's last request may
			// fall in MinIO's next scrape, and in a run this small one
			// request is a percent or more of a side's bytes.)
			if math.Abs(float64(fetched-side.q.SentBytes)) > 0.05*float64(side.q.SentBytes) || fetched < side.c.Wanted() {
				t.Errorf("%s reader: its requests asked for %d bytes (%v), wanted %d; the store sent it %d", side.name, fetched, side.c.Fetched, side.c.Wanted(), side.q.SentBytes)
			}
			t.Logf("%s reader counted %d requests (%v), the store served it %d", side.name, n, side.c.Requests, side.q.Total())
			if math.Abs(float64(n-side.q.Total())) > 0.05*float64(side.q.Total()) {
				t.Errorf("%s reader counted %d requests (%v), the store served it %d", side.name, n, side.c.Requests, side.q.Total())
			}
		}
	}
	if st.Fit.Samples != 2*len(res.Steps) {
		t.Errorf("the fit has %d samples, want both reader phases of %d steps", st.Fit.Samples, len(res.Steps))
	}
	if err := res.Costs.Check(); err != nil || len(res.Costs) == 0 {
		t.Errorf("costs (%d): %v", len(res.Costs), err)
	}
	for _, tg := range res.Targets {
		if tg.NotMeasured {
			t.Errorf("target %q not measured: %s", tg.Name, tg.Note)
		}
	}
	if res.TableI.SIGInitial.N != len(f.Pipelines) || res.TableI.SIGInitial.P50 <= 0 || len(res.Figure6.Rows) != len(f.Pipelines) {
		t.Errorf("table I %+v, figure 6 %d rows", res.TableI.SIGInitial, len(res.Figure6.Rows))
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p[:len(p)-1])); return len(p), nil }
