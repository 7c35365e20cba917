package sigd_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
)

// TestTrainerStatusPerClient: trainer reports are kept per (client, job),
// so one client cannot replace or take over another's job of the same
// name; fields are checked, and a client's number of jobs is bounded.
func TestTrainerStatusPerClient(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 1, RowsPerBlock: 10})
	srv := sigdtest.Start(t, w, sigd.Config{}, sigd.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	report := func(principal string, ts *sigv1.TrainerStatus) error {
		_, err := srv.SIG(t, principal).ReportTrainerStatus(ctx, ts)
		return err
	}
	list := func(principal string) []string {
		r, err := srv.SIG(t, principal).ListTrainerStatus(ctx, &sigv1.ListTrainerStatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, ts := range r.Trainers {
			out = append(out, fmt.Sprintf("%s/%s mpg=%.2f", ts.Client, ts.Job, ts.Mpg))
		}
		return out
	}
	if err := report("trainer", &sigv1.TrainerStatus{Job: "train", Client: "ctr", Mpg: 0.5}); err != nil {
		t.Fatal(err)
	}
	// cvr names the same job and claims to be ctr: refused, as every call
	// naming another client is; nor may a report leave its client out.
	for _, c := range []string{"ctr", ""} {
		err := report("cvr", &sigv1.TrainerStatus{Job: "train", Client: c, Mpg: 0.99})
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), fmt.Sprintf("client %q", c)) {
			t.Fatalf("cvr reporting for client %q: %v, want PermissionDenied naming the client", c, err)
		}
	}
	// Its own job of the same name is its own entry.
	if err := report("cvr", &sigv1.TrainerStatus{Job: "train", Client: "cvr", Mpg: 0.25}); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(list("ctr"), ", "), "ctr/train mpg=0.50"; got != want {
		t.Fatalf("ctr sees %q, want %q", got, want)
	}
	if got, want := strings.Join(list("cvr"), ", "), "cvr/train mpg=0.25"; got != want {
		t.Fatalf("cvr sees %q, want %q", got, want)
	}
	if got, want := strings.Join(list("operator"), ", "), "ctr/train mpg=0.50, cvr/train mpg=0.25"; got != want {
		t.Fatalf("operator sees %q, want %q", got, want)
	}

	// A hold reason is an error message: clipped and blanked, kept. A NaN
	// loss is what a NaN-loss hold reports.
	if err := report("trainer", &sigv1.TrainerStatus{Job: "train", Client: "ctr", Hold: "permanent: line one\nline two" + strings.Repeat("x", 5000),
		Loss: math.NaN()}); err != nil {
		t.Fatalf("held job's report: %v", err)
	}
	r, err := srv.SIG(t, "ctr").ListTrainerStatus(ctx, &sigv1.ListTrainerStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if h := r.Trainers[0].Hold; len(h) != 1024 || !strings.HasPrefix(h, "permanent: line one line two") {
		t.Fatalf("hold kept as %q (%d bytes)", h[:min(len(h), 40)], len(h))
	}

	for _, c := range []struct {
		name  string
		ts    *sigv1.TrainerStatus
		field string
	}{
		{"bad job", &sigv1.TrainerStatus{Client: "cvr", Job: "a/b"}, "job"},
		{"NaN goodput", &sigv1.TrainerStatus{Client: "cvr", Job: "j", Mpg: math.NaN()}, "mpg"},
		{"negative goodput", &sigv1.TrainerStatus{Client: "cvr", Job: "j", RuntimeGoodput: -1}, "runtime_goodput"},
		{"infinite chip-seconds", &sigv1.TrainerStatus{Client: "cvr", Job: "j", ChipSeconds: map[string]float64{"productive": math.Inf(1)}}, "chip_seconds"},
		{"bad category", &sigv1.TrainerStatus{Client: "cvr", Job: "j", ChipSeconds: map[string]float64{"<b>": 1}}, "chip_seconds key"},
		{"control character in phase", &sigv1.TrainerStatus{Client: "cvr", Job: "j", Phase: "a\x00b"}, "phase"},
		{"negative chips", &sigv1.TrainerStatus{Client: "cvr", Job: "j", Chips: -4}, "chips"},
		{"negative step time", &sigv1.TrainerStatus{Client: "cvr", Job: "j", SparsecoreNsPerStep: -1}, "sparsecore_ns_per_step"},
		{"infinite step time", &sigv1.TrainerStatus{Client: "cvr", Job: "j", DeviceNsPerStep: math.Inf(1)}, "device_ns_per_step"},
		{"NaN step time", &sigv1.TrainerStatus{Client: "cvr", Job: "j", TensorcoreNsPerStep: math.NaN()}, "tensorcore_ns_per_step"},
	} {
		err := report("cvr", c.ts)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %v, want InvalidArgument naming %s", c.name, err, c.field)
		}
	}

	// A client's jobs are bounded; reporting again on a known job is not.
	var err2 error
	n := 1 // cvr/train
	for ; n < 1000 && err2 == nil; n++ {
		err2 = report("cvr", &sigv1.TrainerStatus{Client: "cvr", Job: fmt.Sprintf("job-%d", n)})
	}
	if status.Code(err2) != codes.ResourceExhausted || n > 100 {
		t.Fatalf("after %d jobs: %v, want ResourceExhausted within 100", n, err2)
	}
	if err := report("cvr", &sigv1.TrainerStatus{Client: "cvr", Job: "train", Mpg: 0.75}); err != nil {
		t.Fatalf("known job at the cap: %v", err)
	}
	if err := report("trainer", &sigv1.TrainerStatus{Client: "ctr", Job: "other"}); err != nil {
		t.Fatalf("another client at cvr's cap: %v", err)
	}
}
