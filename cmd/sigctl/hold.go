package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/sigdata/sig/internal/cli"
	trainerv1 "github.com/sigdata/sig/proto/trainer/v1"
)

// sigctl hold list    --trainer ADDR --token T
// sigctl hold release --trainer ADDR --token T [--id N] [--reason TEXT]
//
// Training holds (Ads paper VI.A) live in a training job's controller
// (`trainer controller`): a permanent hold — invalid configuration, a graph
// that does not compile, out of memory, a NaN loss — stays until a person
// releases it; releasing needs the job's client token or an operator's.
// Transient holds lift themselves when the data arrives.
func init() {
	registerRemote(remote{name: "hold", server: controllerServer, flags: holdFlags,
		usage: "list | release [--id N] --trainer ADDR --token T: a training job's holds (release needs client or operator)"})
}

func holdFlags(fs *flag.FlagSet) func(*session, []string) error {
	id := fs.Uint64("id", 0, "release: the hold's id (0: the job's current hold)")
	reason := fs.String("reason", "", "release: why it is safe now (logged by the controller)")
	return func(s *session, pos []string) error {
		if len(pos) != 1 || (pos[0] != "list" && pos[0] != "release") {
			return fmt.Errorf("%w: hold list | hold release [--id N]", cli.ErrUsage)
		}
		if pos[0] == "release" {
			resp, err := invoke(s, trainerv1.NewControllerClient, trainerv1.ControllerClient.ReleaseHold,
				&trainerv1.ReleaseHoldRequest{Id: *id, Reason: *reason})
			if err != nil {
				return err
			}
			h := resp.GetReleased()
			fmt.Fprintf(s.stdout, "released hold #%d (%s) of job %s: %s\n", h.GetId(), h.GetKind(), h.GetJob(), h.GetReason())
			return nil
		}
		resp, err := invoke(s, trainerv1.NewControllerClient, trainerv1.ControllerClient.ListHolds, &trainerv1.ListHoldsRequest{})
		if err != nil {
			return err
		}
		tw := table(s.stdout, "ID\tKIND\tJOB\tPIPELINE\tSINCE\tREASON")
		for _, h := range resp.GetHolds() {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", h.GetId(), h.GetKind(), h.GetJob(), h.GetPipeline(),
				h.GetSince().AsTime().Format(time.RFC3339), h.GetReason())
		}
		return tw.Flush()
	}
}
