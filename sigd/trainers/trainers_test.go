package trainers

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/internal/clock"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
)

// TestRegistry: reports are kept per (client, job), listed by client then
// job to whoever may see them, bounded per client, and forgotten (with
// their metric series) once silent for TTL.
func TestRegistry(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	var forgot []string
	r := &Registry{Clock: clk, Forgotten: func(c, j string) { forgot = append(forgot, c+"/"+j) }}
	for _, s := range []*sigv1.TrainerStatus{{Client: "b", Job: "x"}, {Client: "a", Job: "y"}, {Client: "a", Job: "x", Mpg: 0.5}} {
		if err := r.Report(s); err != nil {
			t.Fatal(err)
		}
	}
	names := func(p *auth.Principal) string {
		var out string
		for _, s := range r.List(p) {
			out += s.Client + "/" + s.Job + " "
		}
		return out
	}
	if got := names(&auth.Principal{Role: auth.RoleOperator}); got != "a/x a/y b/x " {
		t.Errorf("operator sees %q", got)
	}
	if got := names(&auth.Principal{Role: auth.RoleClient, Client: "a"}); got != "a/x a/y " {
		t.Errorf("client a sees %q", got)
	}
	if err := r.Report(&sigv1.TrainerStatus{Client: "a", Job: "x", Mpg: -1}); err == nil {
		t.Error("a negative goodput was kept")
	}
	for i := range MaxPerClient - 2 {
		if err := r.Report(&sigv1.TrainerStatus{Client: "a", Job: fmt.Sprint("j", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Report(&sigv1.TrainerStatus{Client: "a", Job: "one-more"}); !errors.Is(err, ErrTooMany) {
		t.Fatalf("job %d of a client: %v, want ErrTooMany", MaxPerClient+1, err)
	}
	if err := r.Report(&sigv1.TrainerStatus{Client: "a", Job: "x"}); err != nil {
		t.Fatalf("a known job's report at the bound: %v", err)
	}
	// b/x stays silent; a/x keeps reporting.
	clk.Advance(TTL / 2)
	if err := r.Report(&sigv1.TrainerStatus{Client: "a", Job: "x"}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(TTL/2 + time.Second)
	if got := names(&auth.Principal{Role: auth.RoleClient, Client: "b"}); got != "" {
		t.Errorf("a job silent for TTL is still listed: %q", got)
	}
	if got := names(&auth.Principal{Role: auth.RoleClient, Client: "a"}); got != "a/x " {
		t.Errorf("client a after TTL: %q", got)
	}
	if len(forgot) != MaxPerClient {
		t.Errorf("forgot %d jobs, want %d (every job but a/x)", len(forgot), MaxPerClient)
	}
}
