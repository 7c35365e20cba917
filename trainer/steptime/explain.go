package steptime

import "fmt"

// MeanStep is a job's mean modelled (unscaled) step in nanoseconds: its
// TensorCore, SparseCore and parameter-server wait (Time.Servers), and the
// device time they make (Time.Device), each step weighted by its chips.
type MeanStep struct {
	TensorCore, SparseCore, Servers, Device float64
}

// Explain says in one line why a job's Program Goodput is pg. PG is ideal
// / device time, and the ideal is the model FLOPs at peak, which is the
// TensorCore time (MPG paper §4: a compute roofline), so a step whose
// device time goes mostly to embedding lookups has a low PG by design: a
// recommendation model's lookups are bound by HBM bandwidth on the
// SparseCore, or by the host's network when the tables are on parameter
// servers, not by FLOPs. A measured pg well below the model's
// tensorCore/device says the steps took longer than their modelled device
// time: the emulator's CPU, not the emulated device, set the pace. It
// returns "" when there were no steps.
func (s MeanStep) Explain(pg float64) string {
	if !(s.Device > 0) {
		return ""
	}
	modelled := s.TensorCore / s.Device
	if pg < 0.9*modelled {
		return fmt.Sprintf("PG %.3f is below the %.3f the step-time model gives (%.3g ns ideal / %.3g ns device time per step): "+
			"steps took longer than their modelled device time, so the emulator's CPU set the pace (raise the time scale)",
			pg, modelled, s.TensorCore, s.Device)
	}
	why := fmt.Sprintf("PG %.3f = %.3g ns ideal (the model FLOPs at TensorCore peak) / %.3g ns device time per step", pg, s.TensorCore, s.Device)
	switch lookups := s.SparseCore + s.Servers; {
	case lookups <= s.TensorCore:
	case s.Servers == 0:
		why += fmt.Sprintf(": the SparseCore's embedding lookups take %.3g ns of it, which the compute roofline (MPG paper §4) does not count as ideal, "+
			"so this lookup-bound model's PG is low by design", s.SparseCore)
	case s.SparseCore == 0:
		why += fmt.Sprintf(": waiting on the parameter servers that hold the embedding tables (the rows and gradients over the host's network) "+
			"takes %.3g ns of it, which the compute roofline (MPG paper §4) does not count as ideal, so this lookup-bound model's PG is low by design", s.Servers)
	default:
		why += fmt.Sprintf(": the embedding lookups take %.3g ns of it on the SparseCore and %.3g ns waiting on the parameter servers, "+
			"which the compute roofline (MPG paper §4) does not count as ideal, so this lookup-bound model's PG is low by design", s.SparseCore, s.Servers)
	}
	return why
}

// ExplainProgramGoodput is MeanStep.Explain for a job whose tables stayed
// on the slice, or whose wait on parameter servers is not known apart
// (sigd's web UI, from the status the trainer reports): given the mean
// modelled TensorCore, SparseCore and device time of its steps.
func ExplainProgramGoodput(pg, tensorCoreNS, sparseCoreNS, deviceNS float64) string {
	return MeanStep{TensorCore: tensorCoreNS, SparseCore: sparseCoreNS, Device: deviceNS}.Explain(pg)
}
