package trainers

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/matching"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
)

// Bounds on trainer reports: every field a client sends is kept in memory,
// exported as metrics and drawn in the operator overview.
const (
	MaxPerClient = 64
	MaxJobs      = 1024
	// TTL: a job that has not reported for this long is forgotten
	// (trainers report every few seconds while they run).
	TTL          = 24 * time.Hour
	maxHoldText  = 1024
	maxChipKinds = 32
	// MaxStallCauses bounds a report's stall ledger lines (issue 30).
	MaxStallCauses = 21
	maxStallText   = 512
)

// ErrTooMany refuses a new job of a client at MaxPerClient jobs, or of a
// service at MaxJobs.
var ErrTooMany = errors.New("too many trainer jobs")

// Registry is the latest status of every trainer job, by client and job.
type Registry struct {
	// Clock decides when a job is silent (default the real clock).
	Clock clock.Clock
	// Reported and Forgotten, if set, are told of each report kept and
	// each job forgotten (sigd's metric series).
	Reported  func(*sigv1.TrainerStatus)
	Forgotten func(client, job string)

	mu   sync.Mutex
	jobs map[key]entry
}

// key names a trainer job: job names are a client's own, so two clients
// may both run a job "train" without one replacing the other's.
type key struct{ client, job string }

type entry struct {
	status *sigv1.TrainerStatus
	seen   time.Time
}

// Report checks and cleans t (Clean) and keeps it as its job's latest
// status, first forgetting jobs silent for TTL; a new job of a client at
// MaxPerClient jobs (or of a service at MaxJobs) is ErrTooMany.
func (r *Registry) Report(t *sigv1.TrainerStatus) error {
	if err := Clean(t); err != nil {
		return err
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.jobs == nil {
		r.jobs = map[key]entry{}
	}
	k := key{t.GetClient(), t.GetJob()}
	if _, ok := r.jobs[k]; !ok {
		r.forgetSilent(now)
		perClient := 0
		for ok := range r.jobs {
			if ok.client == k.client {
				perClient++
			}
		}
		if perClient >= MaxPerClient || len(r.jobs) >= MaxJobs {
			return fmt.Errorf("%w: client %q reports %d trainer jobs (at most %d per client, %d in all); reuse job names",
				ErrTooMany, k.client, perClient, MaxPerClient, MaxJobs)
		}
	}
	r.jobs[k] = entry{status: t, seen: now}
	if r.Reported != nil {
		r.Reported(t)
	}
	return nil
}

// List returns the latest report of every job p may see (an operator
// every job, anyone else its client's), by client then job.
func (r *Registry) List(p *auth.Principal) []*sigv1.TrainerStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgetSilent(r.now())
	var out []*sigv1.TrainerStatus
	for _, e := range r.jobs {
		if p.IsOperator() || e.status.Client == p.Client {
			out = append(out, e.status)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Client != out[j].Client {
			return out[i].Client < out[j].Client
		}
		return out[i].Job < out[j].Job
	})
	return out
}

// forgetSilent drops the jobs silent for TTL. r.mu is held.
func (r *Registry) forgetSilent(now time.Time) {
	for k, e := range r.jobs {
		if now.Sub(e.seen) > TTL {
			delete(r.jobs, k)
			if r.Forgotten != nil {
				r.Forgotten(k.client, k.job)
			}
		}
	}
}

func (r *Registry) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

// Clean checks a report's fields (names as names, text printable, numbers
// finite and non-negative) and cleans its hold reason: an error message of
// the trainer's, clipped and its control characters blanked rather than
// refused, so that a held job still shows. A NaN loss is kept: it is what
// a NaN-loss hold looks like. Errors are matching.InputErrors naming the
// field.
func Clean(t *sigv1.TrainerStatus) error {
	if err := matching.ValidateName("job", t.GetJob()); err != nil {
		return err
	}
	if err := matching.ValidateName("client", t.GetClient()); err != nil {
		return err
	}
	for _, f := range []struct{ field, v string }{{"pipeline", t.GetPipeline()}, {"phase", t.GetPhase()}} {
		if f.v == "" {
			continue
		}
		if err := matching.ValidatePipelineName(f.field, f.v); err != nil {
			return err
		}
	}
	t.Hold = matching.ClipText(t.GetHold(), maxHoldText)
	for _, f := range []struct {
		field string
		v     float64
	}{{"scheduling_goodput", t.GetSchedulingGoodput()}, {"runtime_goodput", t.GetRuntimeGoodput()},
		{"program_goodput", t.GetProgramGoodput()}, {"mpg", t.GetMpg()},
		{"tensorcore_ns_per_step", t.GetTensorcoreNsPerStep()}, {"sparsecore_ns_per_step", t.GetSparsecoreNsPerStep()},
		{"device_ns_per_step", t.GetDeviceNsPerStep()}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			return fieldErr(f.field, "must be finite and non-negative, got %v", f.v)
		}
	}
	if v := t.GetInputStallSeconds(); !(v >= 0) || math.IsInf(v, 0) {
		return fieldErr("input_stall_seconds", "must be finite and non-negative, got %v", v)
	}
	if len(t.GetStall()) > MaxStallCauses {
		return fieldErr("stall", "at most %d causes, got %d", MaxStallCauses, len(t.GetStall()))
	}
	for i, c := range t.GetStall() {
		if err := matching.ValidateName(fmt.Sprintf("stall[%d].kind", i), c.GetKind()); err != nil {
			return err
		}
		if v := c.GetSeconds(); !(v >= 0) || math.IsInf(v, 0) {
			return fieldErr(fmt.Sprintf("stall[%d].seconds", i), "must be finite and non-negative, got %v", v)
		}
		// Text the web UI shows (escaped there): clipped, control
		// characters blanked, as a hold's reason.
		c.Component = matching.ClipText(c.GetComponent(), maxStallText)
		c.Block = matching.ClipText(c.GetBlock(), maxStallText)
		c.Client = matching.ClipText(c.GetClient(), maxStallText)
		c.Sentence = matching.ClipText(c.GetSentence(), 2*maxStallText)
	}
	if t.GetChips() < 0 {
		return fieldErr("chips", "must not be negative, got %d", t.GetChips())
	}
	if len(t.GetChipSeconds()) > maxChipKinds {
		return fieldErr("chip_seconds", "at most %d categories, got %d", maxChipKinds, len(t.GetChipSeconds()))
	}
	for k, v := range t.GetChipSeconds() {
		if err := matching.ValidateName("chip_seconds key", k); err != nil {
			return err
		}
		if !(v >= 0) || math.IsInf(v, 0) {
			return fieldErr("chip_seconds", "%s: must be finite and non-negative, got %v", k, v)
		}
	}
	return nil
}

func fieldErr(field, format string, args ...any) error {
	return &matching.InputError{Field: field, Err: fmt.Errorf(format, args...)}
}
