package workers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sigdata/sig/internal/clock"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/warehouse/blockref"
)

// serveWorkers starts the Workers service over q on a real socket on
// 127.0.0.1 and returns a client.
func serveWorkers(t *testing.T, q *Queue, describe func(TaskID) (*sigv1.Task, error), opts ...ServerOption) sigv1.WorkersClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	sigv1.RegisterWorkersServer(srv, NewWorkersServer(q, describe, opts...))
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return sigv1.NewWorkersClient(conn)
}

func describeFake(id TaskID) (*sigv1.Task, error) {
	if keyName(id.Component) == "ghost" {
		return nil, errors.New("component evicted")
	}
	return &sigv1.Task{
		CanonicalDsl: "input out = lower(col(\"query\"))",
		RawSource:    "ads",
		RawObject:    "raw/ads/" + id.Block.String() + ".arrow",
		MemoObject:   "memo/" + keyName(id.Component) + "/" + id.Block.String() + ".arrow",
		Columns:      []string{"query"},
	}, nil
}

// TestRemoteWorkers runs a pool of remote workers against sigd's lease
// protocol over gRPC: tasks arrive described, completions carry rows and
// bytes to the complete hook, a panicking task is quarantined across the
// wire, and an undescribable task is failed server-side without reaching a
// worker.
func TestRemoteWorkers(t *testing.T) {
	clk := clock.NewFake(t0)
	q := openTest(t, t.TempDir(), clk)
	defer q.Close()
	var mu sync.Mutex
	hooked := map[TaskID]Result{}
	client := serveWorkers(t, q, describeFake, WithCompleteHook(func(_ context.Context, tk Task, res Result) error {
		mu.Lock()
		hooked[tk.ID] = res
		mu.Unlock()
		return nil
	}))

	var seen sync.Map
	runner := RunnerFunc(func(ctx context.Context, tk Task) (Result, error) {
		seen.Store(tk.ID, tk.Spec)
		if keyName(tk.ID.Component) == "bad" {
			panic("kernel bug")
		}
		return Result{Rows: 10, Bytes: int64(len(tk.Spec.GetMemoObject()))}, nil
	})
	pool := NewPool(NewRemoteLeaser(client, time.Hour, ""), runner, PoolOptions{Clock: clk, Name: "remote"})
	pool.Resize(3)

	reqs := []Request{req("bad", "b0", "ads", "ctr", 7), req("ghost", "b0", "ads", "ctr", 7)}
	for i := 0; i < 20; i++ {
		reqs = append(reqs, req(fmt.Sprintf("k%d", i%4), fmt.Sprint(i), fmt.Sprintf("client%d", i%2), "p", 3))
	}
	if _, err := q.Enqueue(reqs...); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the queue to drain", func() bool { return q.Backlog() == 0 })
	if err := pool.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(hooked) != 20 {
		t.Errorf("complete hook ran for %d tasks, want 20", len(hooked))
	}
	for id, res := range hooked {
		if want := int64(len("memo/" + keyName(id.Component) + "/" + id.Block.String() + ".arrow")); res.Rows != 10 || res.Bytes != want {
			t.Errorf("%s: hook got %+v", id, res)
		}
	}
	v, ok := seen.Load(TaskID{nameKey("k1"), blockref.ParseMemo("1")})
	if !ok {
		t.Fatal("k1/1 never reached a worker")
	}
	spec := v.(*sigv1.Task)
	if spec.GetComponentKey() != nameKey("k1").String() || spec.GetBlockId() != "1" || spec.GetClient() != "client1" || spec.GetPriority() != 3 ||
		spec.GetMemoObject() != "memo/k1/1.arrow" || spec.GetCanonicalDsl() == "" {
		t.Errorf("task as the worker saw it: %v", spec)
	}
	if _, ok := seen.Load(TaskID{nameKey("ghost"), blockref.ParseMemo("b0")}); ok {
		t.Error("an undescribable task reached a worker")
	}
	qs := q.ListQuarantine()
	if len(qs) != 2 {
		t.Fatalf("quarantine: %+v", qs)
	}
	if keyName(qs[0].ID.Component) != "bad" || !strings.Contains(qs[0].Err, "kernel bug") || qs[0].Attempts != 3 {
		t.Errorf("bad: %+v", qs[0])
	}
	if keyName(qs[1].ID.Component) != "ghost" || !strings.Contains(qs[1].Err, "component evicted") {
		t.Errorf("ghost: %+v", qs[1])
	}
	if s := pool.Stats(); s.Panics != 3 || s.Completed != 20 {
		t.Errorf("pool stats %+v", s)
	}
}

// TestRemoteLeaseProtocol: the sentinel errors survive the wire, bad
// requests are refused, and a lease wait ends empty on the queue's clock.
func TestRemoteLeaseProtocol(t *testing.T) {
	clk := clock.NewFake(t0)
	q := openTest(t, t.TempDir(), clk)
	defer q.Close()
	client := serveWorkers(t, q, nil)
	rl := NewRemoteLeaser(client, time.Second, "")
	ctx := context.Background()

	if _, err := rl.Heartbeat(ctx, "nope"); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("remote heartbeat of unknown lease: %v", err)
	}
	if err := rl.Complete(ctx, "nope", Result{}); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("remote complete of unknown lease: %v", err)
	}
	if _, err := client.LeaseTask(ctx, &sigv1.LeaseTaskRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("LeaseTask without worker id: %v", err)
	}
	if _, err := client.CompleteTask(ctx, &sigv1.CompleteTaskRequest{LeaseId: "x", Rows: -1}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("CompleteTask with negative rows: %v", err)
	}
	// The op costs a worker reports feed the insertion policy: bad ones are
	// refused naming the field, not kept.
	tooMany := map[string]int64{}
	for i := 0; i <= 256; i++ {
		tooMany[fmt.Sprintf("op%d", i)] = 1
	}
	for name, ops := range map[string]map[string]int64{
		"negative time": {"hash": -1},
		"empty class":   {"": 5},
		"long class":    {strings.Repeat("x", 65): 5},
		"too many":      tooMany,
	} {
		_, err := client.CompleteTask(ctx, &sigv1.CompleteTaskRequest{LeaseId: "x", Rows: 10, OpNanos: ops})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "op_nanos") {
			t.Errorf("CompleteTask with %s op costs: %v", name, err)
		}
	}

	// No work: the call waits its full wait on the queue's clock, then
	// answers with no task.
	type answer struct {
		resp *sigv1.LeaseTaskResponse
		err  error
	}
	ans := make(chan answer, 1)
	go func() {
		r, err := client.LeaseTask(ctx, &sigv1.LeaseTaskRequest{WorkerId: "w", Wait: durationpb.New(5 * time.Second)})
		ans <- answer{r, err}
	}()
	var a answer
	waitFor(t, "the empty answer", func() bool {
		select {
		case a = <-ans:
			return true
		default:
			clk.Advance(time.Second)
			return false
		}
	})
	if a.err != nil || a.resp.GetTask() != nil || a.resp.GetLeaseId() != "" {
		t.Errorf("empty wait answered %v, %v", a.resp, a.err)
	}

	// Cancellation of a leased task reaches the remote holder.
	if _, err := q.Enqueue(req("k", "b", "c", "p", 1)); err != nil {
		t.Fatal(err)
	}
	l, err := rl.Lease(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	if l.Task.ID != (TaskID{nameKey("k"), blockref.ParseMemo("b")}) || !l.Deadline.Equal(clk.Now().Add(30*time.Second)) {
		t.Errorf("remote lease %+v", l)
	}
	if d, err := rl.Heartbeat(ctx, l.ID); err != nil || d.Before(l.Deadline) {
		t.Errorf("remote heartbeat: %v, %v", d, err)
	}
	q.Cancel(l.Task.ID)
	if _, err := rl.Heartbeat(ctx, l.ID); !errors.Is(err, ErrCancelled) {
		t.Errorf("heartbeat of a cancelled task: %v", err)
	}
	if _, err := rl.Fail(ctx, l.ID, "x"); !errors.Is(err, ErrCancelled) {
		t.Errorf("fail of a cancelled task: %v", err)
	}

	// A caller that gives up stops waiting.
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { _, err := rl.Lease(cctx, "w"); errc <- err }()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled remote lease: %v", err)
	}
}

// TestDescribeWrapper: in process, Describe gives the runner the same Spec
// a remote worker gets.
func TestDescribeWrapper(t *testing.T) {
	q := openTest(t, t.TempDir(), clock.NewFake(t0), func(o *Options) { o.MaxAttempts = 1 })
	defer q.Close()
	if _, err := q.Enqueue(req("ghost", "b", "c", "p", 5), req("k", "b", "c", "p", 1)); err != nil {
		t.Fatal(err)
	}
	ls, err := Describe(q, describeFake).LeaseBatch(context.Background(), "w", 1)
	if err != nil {
		t.Fatal(err)
	}
	l := ls[0]
	if keyName(l.Task.ID.Component) != "k" || l.Task.Spec.GetMemoObject() != "memo/k/b.arrow" || l.Task.Spec.GetClient() != "c" {
		t.Errorf("lease %+v spec %v", l, l.Task.Spec)
	}
	if qs := q.ListQuarantine(); len(qs) != 1 || keyName(qs[0].ID.Component) != "ghost" {
		t.Errorf("quarantine %+v", qs)
	}
}

// TestRemoteBadTask: a remote worker parses the component key it is sent,
// once, and refuses a task whose key is not 64 hex digits or whose block is
// missing, naming the field, rather than run it.
func TestRemoteBadTask(t *testing.T) {
	good := nameKey("k").String()
	deadline := timestamppb.New(t0)
	cases := []struct {
		task *sigv1.Task
		want string
	}{
		{&sigv1.Task{ComponentKey: "k", BlockId: "b"}, "component_key"},
		{&sigv1.Task{ComponentKey: good[:63], BlockId: "b"}, "component_key"},
		{&sigv1.Task{ComponentKey: good + "00", BlockId: "b"}, "component_key"},
		{&sigv1.Task{ComponentKey: good, BlockId: ""}, "block id"},
	}
	for _, c := range cases {
		_, err := leaseFromProto("w", &sigv1.LeasedTask{Task: c.task, LeaseId: "l", Deadline: deadline})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("task %v: %v, want ErrInvalid naming %s", c.task, err, c.want)
		}
	}
	l, err := leaseFromProto("w", &sigv1.LeasedTask{Task: &sigv1.Task{ComponentKey: good, BlockId: "b"}, LeaseId: "l", Deadline: deadline})
	if err != nil || l.Task.ID != (TaskID{nameKey("k"), blockref.ParseMemo("b")}) {
		t.Errorf("good task: %+v, %v", l.Task.ID, err)
	}
}

// TestRemoteBatch: over the wire, a worker that asks for max_tasks gets
// the scheduler's pick and other tasks of its raw block, each described
// and with a lease of its own; one that does not ask gets one task, as
// before; a task that cannot be described is failed and left out; tasks
// past the answer's size budget are given back unrun; and a worker
// refuses a batch's task of another block.
func TestRemoteBatch(t *testing.T) {
	clk := clock.NewFake(t0)
	q := openTest(t, t.TempDir(), clk, func(o *Options) { o.MaxAttempts = 1 })
	defer q.Close()
	big := strings.Repeat("x", 400<<10)
	client := serveWorkers(t, q, func(id TaskID) (*sigv1.Task, error) {
		spec, err := describeFake(id)
		if err == nil && id.Block.ID() == "z" {
			spec.CanonicalDsl = big
		}
		return spec, err
	})
	rl := NewRemoteLeaser(client, time.Second, "v1")
	ctx := context.Background()
	if _, err := q.Enqueue(req("a0", "x", "a", "p", 5), req("a1", "x", "a", "p", 5), req("ghost", "x", "a", "p", 5),
		req("b1", "x.v2", "b", "q", 1), req("y1", "y", "a", "p", 5)); err != nil {
		t.Fatal(err)
	}
	// A worker that does not ask for a batch gets one task.
	resp, err := client.LeaseTask(ctx, &sigv1.LeaseTaskRequest{WorkerId: "old"})
	if err != nil || resp.GetTask().GetComponentKey() != nameKey("a0").String() || len(resp.GetMore()) != 0 {
		t.Fatalf("a lease without max_tasks: %v, %v", resp, err)
	}
	ls, err := rl.LeaseBatch(ctx, "w", 8)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range ls {
		got = append(got, fmt.Sprintf("%s/%s %s@%d build=%s spec=%s", keyName(l.Task.ID.Component), l.Task.ID.Block, l.Client, l.Priority, l.Build, l.Task.Spec.GetMemoObject()))
		if !l.Deadline.Equal(clk.Now().Add(30*time.Second)) || l.ID == "" {
			t.Errorf("lease %+v", l)
		}
	}
	want := []string{"a1/x a@5 build=v1 spec=memo/a1/x.arrow", "b1/x.v2 b@1 build=v1 spec=memo/b1/x.v2.arrow"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("batch:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if qs := q.ListQuarantine(); len(qs) != 1 || keyName(qs[0].ID.Component) != "ghost" {
		t.Errorf("quarantine %+v, want ghost, failed for its description", qs)
	}
	// Each task's lease stands alone.
	if _, err := rl.Heartbeat(ctx, ls[1].ID); err != nil {
		t.Error(err)
	}
	if err := rl.Complete(ctx, ls[0].ID, Result{Rows: 1}); err != nil {
		t.Error(err)
	}
	if tk, _ := q.Get(ls[1].Task.ID); tk.State != StateLeased {
		t.Errorf("b1 after a1's completion: %+v", tk)
	}

	// Three tasks whose descriptions are 400 KiB each: two fit the answer,
	// the third goes back to the queue unrun, for the next lease.
	if _, err := q.Enqueue(req("z1", "z", "a", "p", 9), req("z2", "z", "a", "p", 9), req("z3", "z", "a", "p", 9)); err != nil {
		t.Fatal(err)
	}
	ls, err = rl.LeaseBatch(ctx, "w", 8)
	if err != nil || len(ls) != 2 || keyName(ls[0].Task.ID.Component) != "z1" || keyName(ls[1].Task.ID.Component) != "z2" {
		t.Fatalf("a batch of large descriptions: %+v, %v", ls, err)
	}
	if tk, _ := q.Get(parseTask("z3/z")); tk.State != StateQueued || tk.Attempts != 0 {
		t.Errorf("z3 past the answer's budget: %+v, want queued without an attempt", tk)
	}

	// A batch's task of another block is refused: failed at once, the
	// rest kept.
	l1, _, _ := q.TryLease("w")
	l2, _, _ := q.TryLease("w")
	if l1.Task.ID.Block.ID() != "z" || l2.Task.ID.Block.ID() != "y" {
		t.Fatalf("leased %s and %s", l1.Task.ID, l2.Task.ID)
	}
	spec1, _ := describeLease(describeFake, l1)
	spec2, _ := describeLease(describeFake, l2)
	batch, err := rl.batchFromProto(ctx, "w", &sigv1.LeaseTaskResponse{Task: spec1, LeaseId: l1.ID, Deadline: timestamppb.New(l1.Deadline),
		More: []*sigv1.LeasedTask{{Task: spec2, LeaseId: l2.ID, Deadline: timestamppb.New(l2.Deadline)}}})
	if err != nil || len(batch) != 1 || batch[0].ID != l1.ID {
		t.Errorf("a batch of two blocks: %+v, %v", batch, err)
	}
	if tk, _ := q.Get(l2.Task.ID); tk.State != StateQuarantined || !strings.Contains(tk.Err, "in a batch of block z") {
		t.Errorf("the task of another block: %+v", tk)
	}
}
