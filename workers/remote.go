package workers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sigdata/sig/canon"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/warehouse/blockref"
)

// The lease protocol over gRPC (service sig.v1.Workers): `sigd worker
// --sigd ADDR` runs a Pool whose Leaser is a RemoteLeaser, and sigd serves
// NewWorkersServer over its Queue. The sentinel errors cross the wire as
// status codes:
//
//	ErrLeaseLost  <-> NotFound
//	ErrCancelled  <-> Aborted
//	ErrInvalid    <-> InvalidArgument
//	ErrBanned     <-> FailedPrecondition (the worker's build is banned)
//	ErrClosed      -> Unavailable (the worker retries)

// DefaultLeaseWait is how long a LeaseTask call waits for work before
// answering with none; the remote worker then asks again. Long polling:
// a worker learns of new work at once without polling often.
const DefaultLeaseWait = 20 * time.Second

// MaxLeaseWait caps the wait a worker may ask for.
const MaxLeaseWait = time.Minute

func toStatus(err error) error {
	var code codes.Code
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrLeaseLost):
		code = codes.NotFound
	case errors.Is(err, ErrCancelled):
		code = codes.Aborted
	case errors.Is(err, ErrInvalid):
		code = codes.InvalidArgument
	case errors.Is(err, ErrBanned):
		code = codes.FailedPrecondition
	case errors.Is(err, ErrClosed):
		code = codes.Unavailable
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	default:
		code = codes.Internal
	}
	return status.Error(code, err.Error())
}

func fromStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	switch st.Code() {
	case codes.NotFound:
		return fmt.Errorf("%w (remote: %s)", ErrLeaseLost, st.Message())
	case codes.Aborted:
		return fmt.Errorf("%w (remote: %s)", ErrCancelled, st.Message())
	case codes.InvalidArgument:
		return fmt.Errorf("%w (remote: %s)", ErrInvalid, st.Message())
	case codes.FailedPrecondition:
		return fmt.Errorf("%w (remote: %s)", ErrBanned, st.Message())
	}
	return err
}

// ------------------------------------------------------------- client

// RemoteLeaser is a Leaser over gRPC, for workers outside sigd.
type RemoteLeaser struct {
	c     sigv1.WorkersClient
	wait  time.Duration
	build string
}

// NewRemoteLeaser returns a Leaser that asks c for tasks, waiting up to
// wait per call (DefaultLeaseWait if zero), for workers running build
// (BuildID(); tests name their own).
func NewRemoteLeaser(c sigv1.WorkersClient, wait time.Duration, build string) *RemoteLeaser {
	if wait <= 0 {
		wait = DefaultLeaseWait
	}
	return &RemoteLeaser{c: c, wait: wait, build: build}
}

// Lease asks for one task until one comes or ctx is done. The task
// carries Spec, filled by the server.
func (r *RemoteLeaser) Lease(ctx context.Context, workerID string) (Lease, error) {
	ls, err := r.LeaseBatch(ctx, workerID, 1)
	if err != nil {
		return Lease{}, err
	}
	return ls[0], nil
}

// LeaseBatch asks for up to maxTasks tasks of one raw block until some
// come or ctx is done (LeaseTaskRequest.max_tasks): it implements Leaser.
// Each task carries Spec, filled by the server. A task of the batch that
// is malformed, or of another raw block than the first, is failed at once
// (it counts an attempt, as its expiry would) and left out; the others
// are returned.
func (r *RemoteLeaser) LeaseBatch(ctx context.Context, workerID string, maxTasks int) ([]Lease, error) {
	maxTasks = min(max(maxTasks, 1), MaxBatchTasks)
	for {
		resp, err := r.c.LeaseTask(ctx, &sigv1.LeaseTaskRequest{WorkerId: workerID, Wait: durationpb.New(r.wait), Build: r.build,
			MaxTasks: uint32(maxTasks)})
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fromStatus(err)
		}
		if resp.GetTask() == nil {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			continue
		}
		return r.batchFromProto(ctx, workerID, resp)
	}
}

// batchFromProto checks what the server sent: a worker must not act on a
// malformed task, and a batch is of one raw block.
func (r *RemoteLeaser) batchFromProto(ctx context.Context, workerID string, resp *sigv1.LeaseTaskResponse) ([]Lease, error) {
	all := append([]*sigv1.LeasedTask{{Task: resp.GetTask(), LeaseId: resp.GetLeaseId(), Deadline: resp.GetDeadline()}}, resp.GetMore()...)
	var out []Lease
	var first error
	for _, lt := range all {
		l, err := leaseFromProto(workerID, lt)
		if err == nil && len(out) > 0 && l.Task.ID.Block.ID() != out[0].Task.ID.Block.ID() {
			err = fmt.Errorf("%w: server sent task %s in a batch of block %s", ErrInvalid, l.Task.ID, out[0].Task.ID.Block.ID())
		}
		if err != nil {
			first = cmp.Or(first, err)
			if id := lt.GetLeaseId(); id != "" {
				_, _ = r.Fail(ctx, id, err.Error())
			}
			continue
		}
		l.Build = r.build
		out = append(out, l)
	}
	if len(out) == 0 {
		return nil, first
	}
	return out, nil
}

// leaseFromProto checks one task of what the server sent.
func leaseFromProto(workerID string, lt *sigv1.LeasedTask) (Lease, error) {
	t := lt.GetTask()
	// The process boundary: the key travels as hex and is parsed here once.
	k, err := canon.ParseKey(t.GetComponentKey())
	if err != nil {
		return Lease{}, fmt.Errorf("workers: server sent a bad task: %w: component_key: %v", ErrInvalid, err)
	}
	id := TaskID{Component: k, Block: blockref.ParseMemo(t.GetBlockId())}
	if err := id.validate(); err != nil {
		return Lease{}, fmt.Errorf("workers: server sent a bad task: %w", err)
	}
	if lt.GetLeaseId() == "" || !lt.GetDeadline().IsValid() {
		return Lease{}, fmt.Errorf("%w: server sent task %s without a lease id or deadline", ErrInvalid, id)
	}
	return Lease{
		ID:       lt.GetLeaseId(),
		Task:     Task{ID: id, State: StateLeased, Attempts: int(t.GetAttempt()), Spec: t},
		Worker:   workerID,
		Client:   t.GetClient(),
		Priority: t.GetPriority(),
		Deadline: lt.GetDeadline().AsTime(),
	}, nil
}

// Heartbeat extends the lease.
func (r *RemoteLeaser) Heartbeat(ctx context.Context, leaseID string) (time.Time, error) {
	resp, err := r.c.Heartbeat(ctx, &sigv1.HeartbeatRequest{LeaseId: leaseID})
	if err != nil {
		return time.Time{}, fromStatus(err)
	}
	if !resp.GetDeadline().IsValid() {
		return time.Time{}, fmt.Errorf("%w: heartbeat answer without a deadline", ErrInvalid)
	}
	return resp.GetDeadline().AsTime(), nil
}

// Complete reports success with the rows and bytes written.
func (r *RemoteLeaser) Complete(ctx context.Context, leaseID string, res Result) error {
	_, err := r.c.CompleteTask(ctx, &sigv1.CompleteTaskRequest{LeaseId: leaseID, Rows: res.Rows, Bytes: res.Bytes, OpNanos: res.OpNanos,
		MemoObject: res.Object})
	return fromStatus(err)
}

// Fail reports a failed run.
func (r *RemoteLeaser) Fail(ctx context.Context, leaseID string, cause string) (bool, error) {
	resp, err := r.c.FailTask(ctx, &sigv1.FailTaskRequest{LeaseId: leaseID, Error: clip(cause)})
	if err != nil {
		return false, fromStatus(err)
	}
	return resp.GetQuarantined(), nil
}

// ------------------------------------------------------------- server

// ServerOption configures NewWorkersServer.
type ServerOption func(*workersServer)

// WithCompleteHook runs h before a remotely completed task leaves the
// queue: it marks the memoized block ready in the matching cache with the
// rows and bytes the worker reported. Doing it before Complete means a
// crash in between re-runs the task (harmless: outputs are deterministic
// and written whole) instead of leaving the block pending with no task. If
// h fails, CompleteTask fails and the task stays leased.
func WithCompleteHook(h func(ctx context.Context, t Task, res Result) error) ServerOption {
	return func(s *workersServer) { s.onComplete = h }
}

type workersServer struct {
	sigv1.UnimplementedWorkersServer
	q          *Queue
	describe   func(TaskID) (*sigv1.Task, error)
	onComplete func(ctx context.Context, t Task, res Result) error
}

// NewWorkersServer serves the lease protocol over q. describe fills a
// leased task's description (canonical DSL, raw and memo objects, columns,
// schema) from the matching cache; the server sets the key, block, attempt,
// client and priority itself. A task that cannot be described is failed
// and the next one leased (see Describe). Authentication is the caller's
// business (interceptors).
func NewWorkersServer(q *Queue, describe func(TaskID) (*sigv1.Task, error), opts ...ServerOption) sigv1.WorkersServer {
	s := &workersServer{q: q, describe: describe}
	for _, o := range opts {
		o(s)
	}
	return s
}

func (s *workersServer) LeaseTask(ctx context.Context, req *sigv1.LeaseTaskRequest) (*sigv1.LeaseTaskResponse, error) {
	if err := checkName("worker id", req.GetWorkerId()); err != nil {
		return nil, toStatus(err)
	}
	build := req.GetBuild()
	if build != "" {
		if err := checkName("build", build); err != nil {
			return nil, toStatus(err)
		}
	}
	var wait time.Duration
	if w := req.GetWait(); w != nil {
		if err := w.CheckValid(); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "wait: %v", err)
		}
		wait = min(max(w.AsDuration(), 0), MaxLeaseWait)
	}
	maxTasks := min(max(int(req.GetMaxTasks()), 1), MaxBatchTasks)
	// The wait is measured on the queue's clock, like every other time.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if wait > 0 {
		waited := s.q.clock.After(wait)
		go func() {
			select {
			case <-waited:
			case <-wctx.Done():
			}
			cancel()
		}()
	}
	for {
		var ls []Lease
		var err error
		if wait > 0 {
			ls, err = s.q.LeaseBatchAs(wctx, req.GetWorkerId(), build, maxTasks)
		} else {
			ls, err = s.q.TryLeaseBatchAs(req.GetWorkerId(), build, maxTasks)
		}
		if err != nil && ctx.Err() == nil && wctx.Err() != nil {
			return &sigv1.LeaseTaskResponse{}, nil // waited: no task
		}
		if err != nil {
			return nil, toStatus(err)
		}
		if len(ls) == 0 {
			return &sigv1.LeaseTaskResponse{}, nil
		}
		if ctx.Err() != nil {
			// The worker hung up as the tasks were leased: give them back
			// rather than let the leases expire and count attempts.
			for _, l := range ls {
				_ = s.q.Return(l.ID)
			}
			return nil, toStatus(ctx.Err())
		}
		resp, err := s.answer(ctx, ls)
		if err != nil {
			return nil, toStatus(err)
		}
		if resp.GetTask() == nil {
			continue // none could be described; each was failed
		}
		return resp, nil
	}
}

// maxLeaseAnswerBytes bounds the descriptions of a batch's tasks in one
// LeaseTask answer, well under gRPC's default 4 MiB a worker accepts: the
// tasks past it are given back (not counting an attempt) for a later
// lease. The first task always goes.
const maxLeaseAnswerBytes = 1 << 20

// answer describes leased tasks for the wire. A task that cannot be
// described is failed (see Describe) and left out; the tasks past
// maxLeaseAnswerBytes are returned to the queue.
func (s *workersServer) answer(ctx context.Context, ls []Lease) (*sigv1.LeaseTaskResponse, error) {
	resp := &sigv1.LeaseTaskResponse{}
	size := 0
	for i, l := range ls {
		spec, err := describeLease(s.describe, l)
		if err != nil {
			if _, ferr := s.q.Fail(ctx, l.ID, err.Error()); ferr != nil && !errors.Is(ferr, ErrLeaseLost) && !errors.Is(ferr, ErrCancelled) {
				for _, rest := range ls[i+1:] {
					_ = s.q.Return(rest.ID)
				}
				return nil, ferr
			}
			continue
		}
		if size += proto.Size(spec); resp.Task != nil && size > maxLeaseAnswerBytes {
			for _, rest := range ls[i:] {
				_ = s.q.Return(rest.ID)
			}
			break
		}
		if resp.Task == nil {
			resp.Task, resp.LeaseId, resp.Deadline = spec, l.ID, timestamppb.New(l.Deadline)
			continue
		}
		resp.More = append(resp.More, &sigv1.LeasedTask{Task: spec, LeaseId: l.ID, Deadline: timestamppb.New(l.Deadline)})
	}
	return resp, nil
}

func (s *workersServer) Heartbeat(ctx context.Context, req *sigv1.HeartbeatRequest) (*sigv1.HeartbeatResponse, error) {
	d, err := s.q.Heartbeat(ctx, req.GetLeaseId())
	if err != nil {
		return nil, toStatus(err)
	}
	return &sigv1.HeartbeatResponse{Deadline: timestamppb.New(d)}, nil
}

// maxOpClasses bounds a completion's op_nanos (there are a few dozen op
// classes).
const maxOpClasses = 256

func (s *workersServer) CompleteTask(ctx context.Context, req *sigv1.CompleteTaskRequest) (*sigv1.CompleteTaskResponse, error) {
	res := Result{Object: req.GetMemoObject(), Rows: req.GetRows(), Bytes: req.GetBytes(), OpNanos: req.GetOpNanos()}
	if len(res.Object) > 1024 {
		return nil, status.Errorf(codes.InvalidArgument, "memo_object: %d bytes, more than 1024", len(res.Object))
	}
	if res.Rows < 0 || res.Bytes < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "negative rows or bytes: %d, %d", res.Rows, res.Bytes)
	}
	if len(res.OpNanos) > maxOpClasses {
		return nil, status.Errorf(codes.InvalidArgument, "op_nanos: %d op classes, more than %d", len(res.OpNanos), maxOpClasses)
	}
	for class, ns := range res.OpNanos {
		if ns < 0 || len(class) == 0 || len(class) > 64 {
			return nil, status.Errorf(codes.InvalidArgument, "op_nanos[%.64q]: %d ns; want a class of 1 to 64 bytes and a non-negative time", class, ns)
		}
	}
	if s.onComplete != nil {
		l, err := s.q.LookupLease(req.GetLeaseId())
		if err != nil {
			return nil, toStatus(err)
		}
		// Who computed it is what the queue recorded at the lease, not
		// what the completion says.
		res.Build = l.Build
		if err := s.onComplete(ctx, l.Task, res); err != nil {
			return nil, status.Errorf(codes.Unavailable, "complete %s: %v", l.Task.ID, err)
		}
	}
	if err := s.q.Complete(ctx, req.GetLeaseId(), res); err != nil {
		return nil, toStatus(err)
	}
	return &sigv1.CompleteTaskResponse{}, nil
}

func (s *workersServer) FailTask(ctx context.Context, req *sigv1.FailTaskRequest) (*sigv1.FailTaskResponse, error) {
	cause := req.GetError()
	if cause == "" {
		cause = "worker reported failure without a message"
	}
	quarantined, err := s.q.Fail(ctx, req.GetLeaseId(), cause)
	if err != nil {
		return nil, toStatus(err)
	}
	return &sigv1.FailTaskResponse{Quarantined: quarantined}, nil
}
