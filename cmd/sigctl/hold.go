package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
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
	register(&command{name: "hold", run: runHold,
		usage: "list | release [--id N] --trainer ADDR --token T: a training job's holds (release needs client or operator)"})
}

func runHold(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("hold", stderr)
	addr := fs.String("trainer", "127.0.0.1:7100", "the training job's controller gRPC address (env SIG_TRAINER)")
	token := fs.String("token", "", "bearer token: the job's client or an operator (env SIG_TOKEN)")
	useTLS := fs.Bool("tls", false, "connect with TLS (env SIG_TLS)")
	id := fs.Uint64("id", 0, "release: the hold's id (0: the job's current hold)")
	reason := fs.String("reason", "", "release: why it is safe now (logged by the controller)")
	timeout := fs.Duration("timeout", 30*time.Second, "deadline of the call")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || (pos[0] != "list" && pos[0] != "release") {
		return fmt.Errorf("%w: hold list | hold release [--id N]", errUsage)
	}
	cc, err := cli.Dial(*addr, *token, *useTLS)
	if err != nil {
		return err
	}
	defer cc.Close()
	c := trainerv1.NewControllerClient(cc)
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if pos[0] == "release" {
		resp, err := c.ReleaseHold(ctx, &trainerv1.ReleaseHoldRequest{Id: *id, Reason: *reason})
		if err != nil {
			return err
		}
		h := resp.GetReleased()
		fmt.Fprintf(stdout, "released hold #%d (%s) of job %s: %s\n", h.GetId(), h.GetKind(), h.GetJob(), h.GetReason())
		return nil
	}
	resp, err := c.ListHolds(ctx, &trainerv1.ListHoldsRequest{})
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tJOB\tPIPELINE\tSINCE\tREASON")
	for _, h := range resp.GetHolds() {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", h.GetId(), h.GetKind(), h.GetJob(), h.GetPipeline(),
			h.GetSince().AsTime().Format(time.RFC3339), h.GetReason())
	}
	return tw.Flush()
}
