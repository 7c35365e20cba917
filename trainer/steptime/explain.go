package steptime

import "fmt"

// ExplainProgramGoodput says in one line why a job's Program Goodput is pg,
// given the mean modelled (unscaled) TensorCore, SparseCore and device
// time of its steps in nanoseconds. PG is ideal / device time, and the
// ideal is the model FLOPs at peak, which is the TensorCore time (MPG paper
// §4: a compute roofline), so a step whose device time goes mostly to the
// SparseCore's embedding lookups has a low PG by design: a recommendation
// model's lookups are bound by HBM bandwidth, not FLOPs. A measured pg well
// below the model's tensorCore/device says the steps took longer than
// their modelled device time: the emulator's CPU, not the emulated device,
// set the pace. It returns "" when there were no steps.
func ExplainProgramGoodput(pg, tensorCoreNS, sparseCoreNS, deviceNS float64) string {
	if !(deviceNS > 0) {
		return ""
	}
	modelled := tensorCoreNS / deviceNS
	if pg < 0.9*modelled {
		return fmt.Sprintf("PG %.3f is below the %.3f the step-time model gives (%.3g ns ideal / %.3g ns device time per step): "+
			"steps took longer than their modelled device time, so the emulator's CPU set the pace (raise the time scale)",
			pg, modelled, tensorCoreNS, deviceNS)
	}
	why := fmt.Sprintf("PG %.3f = %.3g ns ideal (the model FLOPs at TensorCore peak) / %.3g ns device time per step", pg, tensorCoreNS, deviceNS)
	if sparseCoreNS > tensorCoreNS {
		why += fmt.Sprintf(": the SparseCore's embedding lookups take %.3g ns of it, which the compute roofline (MPG paper §4) does not count as ideal, "+
			"so this lookup-bound model's PG is low by design", sparseCoreNS)
	}
	return why
}
