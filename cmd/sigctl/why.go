package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sigdata/sig/internal/cli"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
)

func init() {
	registerRemote(remote{name: "why", flags: whyFlags,
		json:  "print one JSON object: jobs (each job's TrainerStatus, its stall by cause among them) and now (sigd's ExplainPendingResponse)",
		usage: "--client C --pipeline P [--block ID,...] [--json]: why the pipeline's jobs waited (their input stall by cause) and what its entries wait on now"})
}

// whyFlags is `sigctl why` (issue 30): the stall ledgers the pipeline's
// training jobs reported (trainer/accounting/stall, through
// ReportTrainerStatus), then sigd's answer about its entries not ready
// (ExplainPending).
func whyFlags(fs *flag.FlagSet) func(*session, []string) error {
	client := fs.String("client", "", "client")
	pipeline := fs.String("pipeline", "", "pipeline name")
	blocks := fs.String("block", "", "only these raw blocks (comma-separated ids)")
	limit := fs.Int("limit", 20, "at most this many entries not ready")
	return func(s *session, pos []string) error {
		if err := cli.NoArgs(pos); err != nil {
			return err
		}
		req := &sigv1.ExplainPendingRequest{Client: *client, Pipeline: *pipeline, Limit: uint32(*limit)}
		if *blocks != "" {
			req.BlockIds = strings.Split(*blocks, ",")
		}
		why, err := call(s, sigv1.SIGClient.ExplainPending, req)
		if err != nil {
			return err
		}
		ts, err := call(s, sigv1.SIGClient.ListTrainerStatus, &sigv1.ListTrainerStatusRequest{})
		if err != nil {
			return err
		}
		var mine []*sigv1.TrainerStatus
		for _, t := range ts.GetTrainers() {
			if t.GetClient() == *client && t.GetPipeline() == *pipeline {
				mine = append(mine, t)
			}
		}
		if s.json {
			return whyJSON(s, mine, why)
		}
		w := s.stdout
		jobs := 0
		for _, t := range mine {
			jobs++
			stalled := time.Duration(t.GetInputStallSeconds() * float64(time.Second)).Round(time.Millisecond)
			fmt.Fprintf(w, "job %s (%s/%s, %s): input stall %v by cause\n", t.GetJob(), t.GetClient(), t.GetPipeline(), t.GetPhase(), stalled)
			for _, c := range t.GetStall() {
				fmt.Fprintf(w, "  %s\n", c.GetSentence())
			}
			if len(t.GetStall()) == 0 {
				fmt.Fprintln(w, "  (no stall reported)")
			}
		}
		if jobs == 0 {
			fmt.Fprintf(w, "no training job of %s/%s has reported to sigd\n", *client, *pipeline)
		}
		fmt.Fprintf(w, "now: %d entries of %s/%s not ready", why.GetNotReady(), *client, *pipeline)
		if int(why.GetNotReady()) > len(why.GetEntries()) {
			fmt.Fprintf(w, " (the first %d)", len(why.GetEntries()))
		}
		fmt.Fprintln(w)
		if len(why.GetEntries()) == 0 {
			return nil
		}
		tw := table(w, "INPUT\tCOMPONENT\tBLOCK\tSTATE\tAHEAD\tDETAIL")
		for _, e := range why.GetEntries() {
			state := strings.ToLower(strings.TrimPrefix(e.GetKind().String(), "PENDING_KIND_"))
			var ahead []string
			for _, a := range e.GetAhead() {
				ahead = append(ahead, fmt.Sprintf("%d of %s@%d", a.GetTasks(), a.GetClient(), a.GetPriority()))
			}
			detail := e.GetDetail()
			if e.GetKind() == sigv1.PendingKind_PENDING_KIND_RUNNING {
				detail = strings.TrimSpace(fmt.Sprintf("on %s for %v %s", e.GetWorker(), time.Duration(e.GetRunningMs())*time.Millisecond, detail))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", strings.Join(e.GetInputs(), ","),
				strings.TrimPrefix(e.GetComponentDsl(), "input out = "), e.GetBlockId(), state, strings.Join(ahead, ", "), detail)
		}
		return tw.Flush()
	}
}

// whyJSON prints `sigctl why --json`: {"jobs": [TrainerStatus...], "now":
// ExplainPendingResponse}, each message in protojson's mapping.
func whyJSON(s *session, jobs []*sigv1.TrainerStatus, now *sigv1.ExplainPendingResponse) error {
	out := struct {
		Jobs []json.RawMessage `json:"jobs"`
		Now  json.RawMessage   `json:"now"`
	}{Jobs: []json.RawMessage{}}
	for _, j := range jobs {
		b, err := protojson.Marshal(j)
		if err != nil {
			return err
		}
		out.Jobs = append(out.Jobs, b)
	}
	b, err := protojson.Marshal(now)
	if err != nil {
		return err
	}
	out.Now = b
	enc := json.NewEncoder(s.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
