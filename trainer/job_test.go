package trainer

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/trainer/accounting/goodput"
)

// TestRunJob trains a pipeline end to end against a real sigd (SubmitGraph,
// memoization, read solutions), in-process readers and two hosts: the
// initial phase reads memoized inputs, the caught-up phase reads them too
// where they are ready and computes the rest locally; every event is
// trained exactly once and the loss falls. The job reads its solutions at a
// catalog snapshot it pins at sigd ("ctr:ctr_small") and unpins when done.
func TestRunJob(t *testing.T) {
	e := newEnv(t, 6, 1500, sigd.Options{})
	cfg := e.jobConfig(t, "ctr_small")
	cfg.StatusInterval = 200 * time.Millisecond
	// The controller reports its health and lists its services, like every
	// SIG process (it served neither before).
	cfg.OnController = func(_ *Controller, addr string) {
		if services := sigdtest.CheckHealth(t, addr); !slices.Contains(services, "sig.trainer.v1.Controller") {
			t.Errorf("grpcurl lists %v, not the controller", services)
		}
	}
	pinned := make(chan bool, 1)
	pinCtx, stopPins := context.WithCancel(context.Background())
	go func() {
		defer close(pinned)
		for pinCtx.Err() == nil {
			if pins, err := e.sigd.Catalog().Pins(); err == nil {
				if _, ok := pins["ctr:ctr_small"]; ok {
					pinned <- true
					return
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	reg := prometheus.NewRegistry()
	cfg.Registry = reg
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := RunJob(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() {
		_ = rep.WriteText(os.Stdout)
	}
	if rep.Exit != "done" || rep.Units != 6 || rep.Epochs < 3 {
		t.Fatalf("exit %s with %d units in %d epochs", rep.Exit, rep.Units, rep.Epochs)
	}
	checkExactlyOnce(t, e, "ctr_small")
	// Its in-process readers' work is in the report: every unit read at
	// least once, each with at least one object-store request.
	if rd := rep.Readers; rd == nil || rd.Units < int64(rep.Units) || rd.Rows < rep.EventIDs || rd.ObjectRequests < rd.Units {
		t.Errorf("readers' totals %+v for %d units of %d events", rd, rep.Units, rep.EventIDs)
	}
	stopPins()
	if !<-pinned {
		t.Error("the job never pinned its snapshot at sigd")
	}
	if pins, err := e.sigd.Catalog().Pins(); err != nil || len(pins) != 0 {
		t.Errorf("pins after the job is done: %v %v", pins, err)
	}
	if len(rep.Phases) != 2 || rep.Phases[0].Phase != "initial" || rep.Phases[1].Phase != "caught-up" {
		t.Fatalf("phases %+v", rep.Phases)
	}
	first, last := rep.Phases[0].FirstLoss, rep.Phases[len(rep.Phases)-1].LastLoss
	if !(last < first-0.05) {
		t.Errorf("loss did not fall: %.4f -> %.4f", first, last)
	}
	if rep.Goodput.Fleet.RG <= 0 || rep.Goodput.Fleet.PG <= 0 || rep.Goodput.Fleet.PG > 1 {
		t.Errorf("goodput %+v", rep.Goodput.Fleet)
	}
	// PG is measured on the device-time basis: the steps' committed ideal
	// over their wall time comes to the step-time model's TensorCore over
	// device time (the wall time is the scaled device time), and the
	// report says why it is what it is.
	ms := rep.StepNS()
	job := rep.JobGoodput()
	if modelled := ms.TensorCore / ms.Device; !(job.PG > 0.75*modelled && job.PG < modelled*1.03) {
		t.Errorf("job PG %.4f, step-time model %.4f (%.3g ns TensorCore, %.3g ns SparseCore, %.3g ns device per step)",
			job.PG, modelled, ms.TensorCore, ms.SparseCore, ms.Device)
	}
	var text strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if why := rep.ProgramGoodputWhy(); why == "" || !strings.Contains(text.String(), "program goodput: "+why) {
		t.Errorf("the report does not say why PG is %.3f:\n%s", job.PG, text.String())
	}
	// SG is the job's own: it held all it asked for (but for the moment
	// between asking and getting). The fleet's counts the 3 of 4 chips it
	// gave back once caught up.
	if !(job.SG > 0.95 && rep.Goodput.Fleet.SG < job.SG-0.1) {
		t.Errorf("SG: job %.3f, fleet %.3f", job.SG, rep.Goodput.Fleet.SG)
	}
	// The metrics carry the goodput and the run's gauges.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, n := range []string{goodput.MetricRatio, goodput.MetricChipSeconds, "sig_trainer_steps", "sig_trainer_committed_epochs"} {
		if !names[n] {
			t.Errorf("metric %s not exported", n)
		}
	}
	// sigd's operator overview got the job's status and goodput.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	st, err := e.sigd.SIG(t, "operator").ListTrainerStatus(ctx2, &sigv1.ListTrainerStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range st.GetTrainers() {
		if s.GetJob() == "ctr_small" {
			found = true
			if s.GetSteps() == 0 || s.GetRuntimeGoodput() <= 0 || s.GetPhase() != "caught-up" {
				t.Errorf("status at sigd: %v", s)
			}
			// What the overview says why PG is what it is from.
			if s.GetTensorcoreNsPerStep() <= 0 || s.GetSparsecoreNsPerStep() <= 0 || s.GetDeviceNsPerStep() < s.GetTensorcoreNsPerStep() {
				t.Errorf("status at sigd has no step times: %v", s)
			}
		}
	}
	if !found {
		t.Errorf("sigd has no status of the job: %v", st.GetTrainers())
	}
}
