package paramservers

import "fmt"

// Report is what a job's parameter servers did in a run.
type Report struct {
	Servers  int  `json:"servers"`
	Stacking bool `json:"stacking"`
	// Restarts of servers the job started, after one died.
	Restarts int `json:"restarts"`
	// Moves: the tables were written onto the servers from the model state
	// (ps Assign) — at the switch to the caught-up phase, or when a server
	// no longer had the committed checkpoint. Restores: the servers were
	// rolled back to a checkpoint's committed step (ps Restore).
	Moves    int `json:"moves"`
	Restores int `json:"restores"`
	// Steps trained on the servers, the RPCs the client sent (Lookup,
	// Apply, Assign, reads, checkpoints, restores; one Lookup and one Apply
	// per server per step) and the real wall time of the steps' Lookup and
	// Apply over this machine's loopback: the emulator's cost, spent inside
	// the steps' productive time, which the step-time model's wait on the
	// servers decides (package trainer's doc, "Parameter servers").
	Steps      int     `json:"steps"`
	RPCs       int64   `json:"rpcs"`
	RPCSeconds float64 `json:"rpc_seconds"`
	// Checkpoints the servers wrote for committed model checkpoints, the
	// last committed step, and the seconds spent reading the tables back
	// and checkpointing the servers (in checkpoint_save).
	Checkpoints   int     `json:"checkpoints"`
	CommittedStep int64   `json:"committed_step"`
	SaveSeconds   float64 `json:"save_seconds"`
	// MoveSeconds is the time spent moving the tables onto the servers or
	// rolling them back (in checkpoint_restore).
	MoveSeconds float64 `json:"move_seconds"`
}

// Text is the servers' line of a run's report.
func (p *Report) Text() string {
	return fmt.Sprintf("parameter servers: %d (stacking %v), %d restarts; tables moved on %d times, rolled back %d times; %d steps, %d RPCs, %.2f s in step RPCs; %d checkpoints (step %d), %.2f s saving, %.2f s placing\n",
		p.Servers, p.Stacking, p.Restarts, p.Moves, p.Restores, p.Steps, p.RPCs, p.RPCSeconds, p.Checkpoints, p.CommittedStep, p.SaveSeconds, p.MoveSeconds)
}
