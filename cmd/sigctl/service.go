package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sigdata/sig/internal/cli"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
)

func init() {
	register(&command{name: "submit", run: runSubmit,
		usage: "FILE --client C --pipeline P --priority N --range FROM:TO [--json]: submit a graph, print its read solution"})
	register(&command{name: "watch", run: runWatch,
		usage: "--client C --pipeline P [--json]: follow a read solution until it is complete"})
	register(&command{name: "set-priority", run: runSetPriority,
		usage: "--client C --pipeline P --priority N: re-prioritize a pipeline and its queued work"})
	register(&command{name: "queues", run: runQueues, usage: "[--json]: queue depth per client and priority"})
	register(&command{name: "stats", run: runStats, usage: "[--json]: hit rate, reuse, queues, workers, task latency"})
	register(&command{name: "quarantine", run: runQuarantine,
		usage: "list | release COMPONENT BLOCK: quarantined tasks (release needs the operator role)"})
}

// conn holds the flags every command talking to sigd takes.
type conn struct {
	addr, token string
	tls         bool
	timeout     time.Duration
}

func connFlags(fs *flag.FlagSet) *conn {
	c := &conn{}
	fs.StringVar(&c.addr, "sigd", "127.0.0.1:7070", "sigd gRPC address (env SIG_SIGD)")
	fs.StringVar(&c.token, "token", "", "bearer token (env SIG_TOKEN)")
	fs.BoolVar(&c.tls, "tls", false, "connect with TLS (env SIG_TLS)")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "deadline of a call")
	return c
}

func (c *conn) dial() (*grpc.ClientConn, sigv1.SIGClient, error) {
	cc, err := cli.Dial(c.addr, c.token, c.tls)
	if err != nil {
		return nil, nil, err
	}
	return cc, sigv1.NewSIGClient(cc), nil
}

// parseRange reads FROM:TO; each side is microseconds since the epoch or
// an RFC 3339 time.
func parseRange(s string) (*sigv1.EventRange, error) {
	from, to, ok := strings.Cut(s, ":")
	if !ok {
		// RFC 3339 times contain ':'; split on the ':' between two times.
		return nil, fmt.Errorf("%w: --range wants FROM:TO", errUsage)
	}
	if strings.Count(s, ":") > 1 {
		i := strings.Index(s, "Z:")
		if i < 0 {
			return nil, fmt.Errorf("%w: --range %q: write times as RFC 3339 UTC (…Z:…Z) or microseconds", errUsage, s)
		}
		from, to = s[:i+1], s[i+2:]
	}
	parse := func(v string) (int64, error) {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n, nil
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return 0, fmt.Errorf("%w: --range: %q is neither microseconds nor RFC 3339", errUsage, v)
		}
		return t.UnixMicro(), nil
	}
	f, err := parse(from)
	if err != nil {
		return nil, err
	}
	t, err := parse(to)
	if err != nil {
		return nil, err
	}
	return &sigv1.EventRange{StartMicros: f, EndMicros: t}, nil
}

func printJSON(w io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  ", EmitUnpopulated: false}.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

func printSolution(w io.Writer, s *sigv1.ReadSolution) {
	fmt.Fprintf(w, "pipeline %s/%s: %d ready, %d pending, %d failed blocks; complete=%v\n",
		s.Client, s.Pipeline, s.BlocksReady, s.BlocksPending, s.BlocksFailed, s.Complete)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INPUT\tCOMPONENT\tTYPE\tREADY\tPENDING\tFAILED")
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
		key := in.ComponentKey
		if len(key) > 12 {
			key = key[:12]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\n", in.Input, key, in.Type, r, p, f)
	}
	tw.Flush()
}

func runSubmit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("submit", stderr)
	c := connFlags(fs)
	client := fs.String("client", "", "client")
	pipeline := fs.String("pipeline", "", "pipeline name")
	prio := fs.Int("priority", 0, "priority (0-1000, higher first)")
	rng := fs.String("range", "", "event range FROM:TO (microseconds or RFC 3339)")
	source := fs.String("source", "ads", "raw source")
	asJSON := fs.Bool("json", false, "print the response as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	path, err := oneFile(pos)
	if err != nil {
		return err
	}
	r, err := parseRange(*rng)
	if err != nil {
		return err
	}
	src, err := readDSL(path)
	if err != nil {
		return err
	}
	cc, sc, err := c.dial()
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := sc.SubmitGraph(ctx, &sigv1.SubmitGraphRequest{Client: *client, Pipeline: *pipeline, Priority: int32(*prio),
		Range: r, Graph: &sigv1.GraphSpec{Spec: &sigv1.GraphSpec_Dsl{Dsl: string(src)}, RawSource: *source}})
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, resp)
	}
	fmt.Fprintf(stdout, "components %d (hits %d), blocks hit %d missed %d, tasks enqueued %d\n",
		resp.Components, resp.ComponentHits, resp.BlockHits, resp.BlockMisses, resp.TasksEnqueued)
	printSolution(stdout, resp.Solution)
	return nil
}

func runWatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("watch", stderr)
	c := connFlags(fs)
	client := fs.String("client", "", "client")
	pipeline := fs.String("pipeline", "", "pipeline name")
	asJSON := fs.Bool("json", false, "print updates as JSON")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	cc, sc, err := c.dial()
	if err != nil {
		return err
	}
	defer cc.Close()
	st, err := sc.WatchReadSolution(ctx, &sigv1.WatchReadSolutionRequest{Client: *client, Pipeline: *pipeline})
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
		switch {
		case *asJSON:
			if err := printJSON(stdout, up); err != nil {
				return err
			}
		case up.Solution != nil:
			printSolution(stdout, up.Solution)
		default:
			for _, ch := range up.Changes {
				fmt.Fprintf(stdout, "%s %s %s\n", ch.ComponentKey[:min(12, len(ch.ComponentKey))], ch.Block.BlockId,
					strings.TrimPrefix(ch.Block.State.String(), "BLOCK_STATE_"))
			}
		}
	}
}

func runSetPriority(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("set-priority", stderr)
	c := connFlags(fs)
	client := fs.String("client", "", "client")
	pipeline := fs.String("pipeline", "", "pipeline name")
	prio := fs.Int("priority", 0, "new priority")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	cc, sc, err := c.dial()
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := sc.SetPriority(ctx, &sigv1.SetPriorityRequest{Client: *client, Pipeline: *pipeline, Priority: int32(*prio)})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s/%s: priority %d, %d queued tasks re-prioritized\n", *client, *pipeline, *prio, resp.TasksReprioritized)
	return nil
}

func printQueues(w io.Writer, qs []*sigv1.QueueDepth) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLIENT\tPRIORITY\tQUEUED\tLEASED")
	for _, q := range qs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", q.Client, q.Priority, q.Queued, q.Leased)
	}
	tw.Flush()
}

func runQueues(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("queues", stderr)
	c := connFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	cc, sc, err := c.dial()
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := sc.ListQueues(ctx, &sigv1.ListQueuesRequest{})
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, resp)
	}
	printQueues(stdout, resp.Queues)
	return nil
}

func runStats(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("stats", stderr)
	c := connFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	cc, sc, err := c.dial()
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	s, err := sc.Stats(ctx, &sigv1.StatsRequest{})
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, s)
	}
	fmt.Fprintf(stdout, "submits %d, component hit rate %.3f, block hit rate %.3f over %d block requests\n",
		s.Submits, s.ComponentHitRate, s.BlockHitRate, s.BlockRequests)
	fmt.Fprintf(stdout, "components %d, pipelines %d, memo blocks %d (%d bytes), pipelines per memo block: mean %.2f, max %d\n",
		s.Components, s.Pipelines, s.MemoBlocks, s.MemoBytes, s.PipelinesPerBlockMean, s.PipelinesPerBlockMax)
	fmt.Fprintf(stdout, "workers %d (desired %d), tasks completed %d, quarantined %d, task latency p50 %.3fs p99 %.3fs\n",
		s.WorkersActual, s.WorkersDesired, s.TasksCompleted, s.Quarantined, s.TaskLatencyP50Seconds, s.TaskLatencyP99Seconds)
	printQueues(stdout, s.Queues)
	return nil
}

func runQuarantine(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("quarantine", stderr)
	c := connFlags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		pos = []string{"list"}
	}
	cc, sc, err := c.dial()
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	switch {
	case pos[0] == "list" && len(pos) == 1:
		resp, err := sc.ListQuarantine(ctx, &sigv1.ListQuarantineRequest{})
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "COMPONENT\tBLOCK\tATTEMPTS\tCLIENT\tERROR")
		for _, t := range resp.Tasks {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", t.ComponentKey, t.BlockId, t.Attempts, t.Client, t.Error)
		}
		return tw.Flush()
	case pos[0] == "release" && len(pos) == 3:
		resp, err := sc.ReleaseQuarantine(ctx, &sigv1.ReleaseQuarantineRequest{ComponentKey: pos[1], BlockId: pos[2]})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "released: %v\n", resp.Released)
		return nil
	}
	return fmt.Errorf("%w: quarantine list | quarantine release COMPONENT BLOCK", errUsage)
}
