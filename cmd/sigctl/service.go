package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/sigdata/sig/internal/cli"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
)

func init() {
	registerRemote(remote{name: "submit", flags: submitFlags, json: "print the response as JSON",
		usage: "FILE --client C --pipeline P --priority N --range FROM:TO [--memoize INPUT=always|never,...] [--json]: submit a graph, print its read solution"})
	registerRemote(remote{name: "watch", flags: watchFlags, json: "print updates as JSON",
		usage: "--client C --pipeline P [--json]: follow a read solution until it is complete"})
	registerRemote(remote{name: "set-priority", flags: setPriorityFlags,
		usage: "--client C --pipeline P --priority N: re-prioritize a pipeline and its queued work"})
	registerRemote(remote{name: "queues", flags: queuesFlags, json: "print JSON", usage: "[--json]: queue depth per client and priority"})
	registerRemote(remote{name: "stats", flags: statsFlags, json: "print JSON", usage: "[--json]: hit rate, reuse, queues, workers, task latency"})
	registerRemote(remote{name: "quarantine", flags: quarantineFlags,
		usage: "list | release COMPONENT BLOCK: quarantined tasks (release needs the operator role)"})
	registerRemote(remote{name: "builds", flags: buildsFlags,
		usage: "list | lift BUILD: worker builds banned from leasing for computing wrong values (lift needs the operator role)"})
}

// parseRange reads --range FROM:TO (cli.ParseTimeRange; both sides given).
func parseRange(s string) (*sigv1.EventRange, error) {
	from, to, err := cli.ParseTimeRange(s, false)
	if err != nil {
		return nil, err
	}
	return &sigv1.EventRange{StartMicros: from, EndMicros: to}, nil
}

func printSolution(w io.Writer, s *sigv1.ReadSolution) {
	fmt.Fprintf(w, "pipeline %s/%s: %d ready, %d pending, %d failed blocks; complete=%v\n",
		s.Client, s.Pipeline, s.BlocksReady, s.BlocksPending, s.BlocksFailed, s.Complete)
	tw := table(w, "INPUT\tCOMPONENT\tTYPE\tREADY\tPENDING\tFAILED\tCOVER")
	for _, in := range s.Inputs {
		var r, p, f int
		for _, b := range in.Blocks {
			switch b.State {
			case sigv1.BlockState_BLOCK_STATE_READY:
				r++
			case sigv1.BlockState_BLOCK_STATE_PENDING:
				p++
			case sigv1.BlockState_BLOCK_STATE_FAILED:
				f++
			}
		}
		cover := "whole"
		switch {
		case in.Computed && len(in.MemoNodes) == 0:
			cover = "readers, from raw columns"
		case in.Computed:
			cover = in.ResidualDsl
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", in.Input, shortKey(in.ComponentKey), in.Type, r, p, f, cover)
	}
	tw.Flush()
	for _, in := range s.Inputs {
		if in.Reason != "" {
			fmt.Fprintf(w, "%s: %s\n", in.Input, in.Reason)
		}
	}
}

// parseMemoize reads --memoize INPUT=always|never|auto,...: overrides of
// the insertion policy by model input.
func parseMemoize(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		name, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || name == "" || (v != "always" && v != "never" && v != "auto") {
			return nil, fmt.Errorf("%w: --memoize %q: want INPUT=always|never|auto, comma-separated", cli.ErrUsage, kv)
		}
		out[name] = v
	}
	return out, nil
}

func submitFlags(fs *flag.FlagSet) func(*session, []string) error {
	client := fs.String("client", "", "client")
	pipeline := fs.String("pipeline", "", "pipeline name")
	prio := fs.Int("priority", 0, "priority (0-1000, higher first)")
	rng := fs.String("range", "", "event range FROM:TO (microseconds or RFC 3339)")
	source := fs.String("source", "ads", "raw source")
	memoize := fs.String("memoize", "", "override the insertion policy per model input: INPUT=always|never|auto, comma-separated")
	return func(s *session, pos []string) error {
		path, err := oneFile(pos)
		if err != nil {
			return err
		}
		r, err := parseRange(*rng)
		if err != nil {
			return err
		}
		overrides, err := parseMemoize(*memoize)
		if err != nil {
			return err
		}
		src, err := readDSL(path)
		if err != nil {
			return err
		}
		resp, err := call(s, sigv1.SIGClient.SubmitGraph, &sigv1.SubmitGraphRequest{Client: *client, Pipeline: *pipeline,
			Priority: int32(*prio), Range: r, Graph: &sigv1.GraphSpec{Spec: &sigv1.GraphSpec_Dsl{Dsl: string(src)}, RawSource: *source},
			Memoize: overrides})
		if err != nil {
			return err
		}
		return s.print(resp, func(w io.Writer) error {
			fmt.Fprintf(w, "components %d (hits %d), blocks hit %d missed %d, tasks enqueued %d\n",
				resp.Components, resp.ComponentHits, resp.BlockHits, resp.BlockMisses, resp.TasksEnqueued)
			printSolution(w, resp.Solution)
			return nil
		})
	}
}

// watchFlags: a watch is a stream that lasts until the solution is
// complete, so it has no deadline.
func watchFlags(fs *flag.FlagSet) func(*session, []string) error {
	client := fs.String("client", "", "client")
	pipeline := fs.String("pipeline", "", "pipeline name")
	return func(s *session, pos []string) error {
		if err := cli.NoArgs(pos); err != nil {
			return err
		}
		sc, err := s.sigd()
		if err != nil {
			return err
		}
		st, err := sc.WatchReadSolution(s.ctx, &sigv1.WatchReadSolutionRequest{Client: *client, Pipeline: *pipeline})
		if err != nil {
			return err
		}
		for {
			up, err := st.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			err = s.print(up, func(w io.Writer) error {
				if up.Solution != nil {
					printSolution(w, up.Solution)
					return nil
				}
				for _, ch := range up.Changes {
					fmt.Fprintf(w, "%s %s %s\n", shortKey(ch.ComponentKey), ch.Block.BlockId,
						strings.TrimPrefix(ch.Block.State.String(), "BLOCK_STATE_"))
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
}

func setPriorityFlags(fs *flag.FlagSet) func(*session, []string) error {
	client := fs.String("client", "", "client")
	pipeline := fs.String("pipeline", "", "pipeline name")
	prio := fs.Int("priority", 0, "new priority")
	return func(s *session, pos []string) error {
		if err := cli.NoArgs(pos); err != nil {
			return err
		}
		resp, err := call(s, sigv1.SIGClient.SetPriority, &sigv1.SetPriorityRequest{Client: *client, Pipeline: *pipeline, Priority: int32(*prio)})
		if err != nil {
			return err
		}
		fmt.Fprintf(s.stdout, "%s/%s: priority %d, %d queued tasks re-prioritized\n", *client, *pipeline, *prio, resp.TasksReprioritized)
		return nil
	}
}

func printQueues(w io.Writer, qs []*sigv1.QueueDepth) error {
	tw := table(w, "CLIENT\tPRIORITY\tQUEUED\tLEASED")
	for _, q := range qs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", q.Client, q.Priority, q.Queued, q.Leased)
	}
	return tw.Flush()
}

func queuesFlags(*flag.FlagSet) func(*session, []string) error {
	return func(s *session, pos []string) error {
		if err := cli.NoArgs(pos); err != nil {
			return err
		}
		resp, err := call(s, sigv1.SIGClient.ListQueues, &sigv1.ListQueuesRequest{})
		if err != nil {
			return err
		}
		return s.print(resp, func(w io.Writer) error { return printQueues(w, resp.Queues) })
	}
}

func statsFlags(*flag.FlagSet) func(*session, []string) error {
	return func(s *session, pos []string) error {
		if err := cli.NoArgs(pos); err != nil {
			return err
		}
		st, err := call(s, sigv1.SIGClient.Stats, &sigv1.StatsRequest{})
		if err != nil {
			return err
		}
		return s.print(st, func(w io.Writer) error {
			fmt.Fprintf(w, "submits %d, component hit rate %.3f, block hit rate %.3f over %d block requests\n",
				st.Submits, st.ComponentHitRate, st.BlockHitRate, st.BlockRequests)
			fmt.Fprintf(w, "components %d, pipelines %d, memo blocks %d (%d bytes), pipelines per memo block: mean %.2f, max %d\n",
				st.Components, st.Pipelines, st.MemoBlocks, st.MemoBytes, st.PipelinesPerBlockMean, st.PipelinesPerBlockMax)
			fmt.Fprintf(w, "workers %d (desired %d), tasks completed %d, quarantined %d, task latency p50 %.3fs p99 %.3fs\n",
				st.WorkersActual, st.WorkersDesired, st.TasksCompleted, st.Quarantined, st.TaskLatencyP50Seconds, st.TaskLatencyP99Seconds)
			return printQueues(w, st.Queues)
		})
	}
}

// buildsFlags lists the worker builds banned from leasing (issue 27: sigd
// found a block a build computed wrong computed wrong again by it) and
// lifts a ban.
func buildsFlags(*flag.FlagSet) func(*session, []string) error {
	return func(s *session, pos []string) error {
		switch {
		case len(pos) == 0 || pos[0] == "list" && len(pos) == 1:
			resp, err := call(s, sigv1.SIGClient.ListWorkerBuildBans, &sigv1.ListWorkerBuildBansRequest{})
			if err != nil {
				return err
			}
			tw := table(s.stdout, "BUILD\tSINCE\tREASON")
			for _, b := range resp.Bans {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", b.Build, b.Since.AsTime().UTC().Format("2006-01-02 15:04:05Z"), b.Reason)
			}
			return tw.Flush()
		case pos[0] == "lift" && len(pos) == 2:
			resp, err := call(s, sigv1.SIGClient.LiftWorkerBuildBan, &sigv1.LiftWorkerBuildBanRequest{Build: pos[1]})
			if err != nil {
				return err
			}
			fmt.Fprintf(s.stdout, "lifted: %v\n", resp.Lifted)
			return nil
		}
		return fmt.Errorf("%w: builds list | builds lift BUILD", cli.ErrUsage)
	}
}

func quarantineFlags(*flag.FlagSet) func(*session, []string) error {
	return func(s *session, pos []string) error {
		switch {
		case len(pos) == 0 || pos[0] == "list" && len(pos) == 1:
			resp, err := call(s, sigv1.SIGClient.ListQuarantine, &sigv1.ListQuarantineRequest{})
			if err != nil {
				return err
			}
			tw := table(s.stdout, "COMPONENT\tBLOCK\tATTEMPTS\tCLIENT\tERROR")
			for _, t := range resp.Tasks {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", t.ComponentKey, t.BlockId, t.Attempts, t.Client, t.Error)
			}
			return tw.Flush()
		case pos[0] == "release" && len(pos) == 3:
			resp, err := call(s, sigv1.SIGClient.ReleaseQuarantine, &sigv1.ReleaseQuarantineRequest{ComponentKey: pos[1], BlockId: pos[2]})
			if err != nil {
				return err
			}
			fmt.Fprintf(s.stdout, "released: %v\n", resp.Released)
			return nil
		}
		return fmt.Errorf("%w: quarantine list | quarantine release COMPONENT BLOCK", cli.ErrUsage)
	}
}
