package trainer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sigdata/sig/internal/cli"
	"github.com/sigdata/sig/internal/clock"
	readerv1 "github.com/sigdata/sig/proto/reader/v1"
	trainerv1 "github.com/sigdata/sig/proto/trainer/v1"
	"github.com/sigdata/sig/reader"
	"github.com/sigdata/sig/trainer/accounting/stall"
	"github.com/sigdata/sig/trainer/buffer"
	"github.com/sigdata/sig/trainer/control"
	"github.com/sigdata/sig/trainer/model"
	"github.com/sigdata/sig/warehouse/blockref"
)

// HostConfig configures a TPU host worker (paper III.B: it supplies
// training data to the chips and does little computation itself).
type HostConfig struct {
	// ID names the host in the slice (unique per job). Required.
	ID string
	// Controller is the controller's address, dialed with Token (role
	// trainer) and TLS; or Conn, an established connection.
	Controller string
	Token      string
	TLS        bool
	Conn       *grpc.ClientConn
	// ReaderToken authenticates to the readers. Default Token.
	ReaderToken string
	// Readers, if set, replace the reader addresses the controller sends.
	Readers []string
	// DecideInterval is how often the in-flight units are re-decided
	// (buffer.Decide). Default 50ms.
	DecideInterval time.Duration
	// ReconnectDelay is the wait before reconnecting to a lost controller.
	// Default 200ms.
	ReconnectDelay time.Duration
	// Preempt receives preemption notices for this host (cmd/trainer sends
	// one on SIGTERM): the host tells the controller, keeps working until
	// it is told to exit, and exits at the notice's deadline at the latest
	// (paper VI.B).
	Preempt <-chan time.Duration
	// InFlight, when Max > 0, overrides the controller's scaling bounds
	// (benchmarks pin a fixed in-flight count with Min = Max).
	InFlight buffer.Scaling
	Clock    clock.Clock
	Logger   *slog.Logger
}

func (c *HostConfig) ensureDefaults() {
	if c.ReaderToken == "" {
		c.ReaderToken = c.Token
	}
	if c.DecideInterval <= 0 {
		c.DecideInterval = 50 * time.Millisecond
	}
	if c.ReconnectDelay <= 0 {
		c.ReconnectDelay = 200 * time.Millisecond
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// errHostExit: the controller told the host to exit.
var errHostExit = errors.New("told to exit")

// RunHost runs a host worker until the controller tells it to exit (nil),
// its preemption deadline passes (nil), or ctx ends. A lost controller is
// reconnected: a restarted controller retrains whatever was not committed.
func RunHost(ctx context.Context, cfg HostConfig) error {
	cfg.ensureDefaults()
	if cfg.ID == "" {
		return errors.New("trainer: host id is required")
	}
	conn := cfg.Conn
	if conn == nil {
		var err error
		if conn, err = cli.Dial(cfg.Controller, cfg.Token, cfg.TLS); err != nil {
			return fmt.Errorf("trainer: dial controller: %w", err)
		}
		defer conn.Close()
	}
	h := &host{cfg: cfg, log: cfg.Logger.With("host", cfg.ID), client: trainerv1.NewControllerClient(conn)}
	defer func() {
		if h.readers != nil {
			h.readers.Close()
		}
	}()
	var deadline <-chan time.Time
	for {
		err := h.session(ctx, &deadline)
		switch {
		case errors.Is(err, errHostExit):
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case h.jobPreempted:
			h.log.Warn("controller gone after a preemption notice: exiting", "err", err)
			return nil
		}
		h.log.Warn("controller session ended; reconnecting", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return nil
		case <-cfg.Clock.After(cfg.ReconnectDelay):
		}
	}
}

type host struct {
	// jobPreempted: a preemption notice for the whole job came; when the
	// controller goes away the host exits too instead of reconnecting
	// (paper VI.B: the preempted jobs exit).
	jobPreempted bool
	cfg          HostConfig
	log          *slog.Logger
	client       trainerv1.ControllerClient
	readers      *reader.Client
	addrs        []string
	welcome      *trainerv1.Welcome
	feats        model.Features
}

// hostAttempt is the host's part of one epoch attempt.
type hostAttempt struct {
	id     uint64
	ctx    context.Context
	cancel context.CancelFunc
	buf    *buffer.Buffer
	wg     sync.WaitGroup

	mu        sync.Mutex
	changed   chan struct{}
	inflight  int  // units assigned and not yet read whole
	requested bool // a request is outstanding
	drain     bool
	credits   int
	target    int
}

func (a *hostAttempt) update(f func()) {
	a.mu.Lock()
	f()
	close(a.changed)
	a.changed = make(chan struct{})
	a.mu.Unlock()
}

// session runs one connection to the controller.
func (h *host) session(ctx context.Context, deadline *<-chan time.Time) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := h.client.Session(ctx)
	if err != nil {
		return err
	}
	out := make(chan *trainerv1.HostMessage, 1024)
	send := func(m *trainerv1.HostMessage) {
		select {
		case out <- m:
		case <-ctx.Done():
		}
	}
	if err := stream.Send(&trainerv1.HostMessage{Msg: &trainerv1.HostMessage_Hello{Hello: &trainerv1.Hello{HostId: h.cfg.ID, Incarnation: newIncarnation()}}}); err != nil {
		return err
	}
	sendErr := make(chan error, 1)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case m := <-out:
				if err := stream.Send(m); err != nil {
					sendErr <- err
					return
				}
			}
		}
	}()
	in := make(chan *trainerv1.ControllerMessage, 64)
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case in <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	var at *hostAttempt
	stop := func() {
		if at != nil {
			at.cancel()
			at.buf.Close()
			at.wg.Wait()
			at = nil
		}
	}
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-sendErr:
			return err
		case err := <-recvErr:
			return err
		case <-*deadline:
			h.log.Warn("preemption deadline passed: exiting")
			return errHostExit
		case d := <-h.cfg.Preempt:
			h.log.Warn("preemption notice: telling the controller", "notice", d)
			*deadline = h.cfg.Clock.After(d)
			send(&trainerv1.HostMessage{Msg: &trainerv1.HostMessage_Preempt{Preempt: &trainerv1.PreemptRequest{
				Notice: durationpb.New(d), Scope: h.cfg.ID, Reason: "host received a preemption notice"}}})
		case m := <-in:
			switch x := m.Msg.(type) {
			case *trainerv1.ControllerMessage_Welcome:
				if err := h.onWelcome(x.Welcome); err != nil {
					return err
				}
			case *trainerv1.ControllerMessage_Start:
				stop()
				if h.welcome == nil {
					return errors.New("attempt before welcome")
				}
				at = h.startAttempt(ctx, x.Start.GetAttempt(), send)
			case *trainerv1.ControllerMessage_Assign:
				if at == nil || x.Assign.GetAttempt() != at.id {
					continue
				}
				skips := map[string]*trainerv1.UnitSkip{}
				for _, sk := range x.Assign.GetSkips() {
					skips[sk.GetUnitId()] = sk
				}
				for _, u := range x.Assign.GetUnits() {
					at.update(func() { at.inflight++ })
					at.wg.Add(1)
					go h.readUnit(at, u, skips[u.GetUnitId()], send)
				}
				at.update(func() { at.requested = false })
			case *trainerv1.ControllerMessage_Drain:
				if at != nil && x.Drain.GetAttempt() == at.id {
					at.update(func() { at.drain, at.requested = true, false })
				}
			case *trainerv1.ControllerMessage_Ack:
				if at != nil && x.Ack.GetAttempt() == at.id {
					at.update(func() { at.credits++ })
				}
			case *trainerv1.ControllerMessage_Abort:
				if at != nil && x.Abort.GetAttempt() == at.id {
					h.log.Info("attempt aborted", "attempt", at.id, "reason", x.Abort.GetReason())
					stop()
				}
			case *trainerv1.ControllerMessage_Preempt:
				h.log.Info("preemption notice broadcast", "scope", x.Preempt.GetScope(), "deadline", x.Preempt.GetDeadline().AsTime())
				if x.Preempt.GetScope() == control.ScopeJob {
					h.jobPreempted = true
				}
			case *trainerv1.ControllerMessage_Exit:
				h.log.Info("told to exit", "reason", x.Exit.GetReason())
				return errHostExit
			}
		}
	}
}

func (h *host) onWelcome(w *trainerv1.Welcome) error {
	f, err := featuresFromProto(w.GetInputs())
	if err != nil {
		return fmt.Errorf("welcome: %w", err)
	}
	addrs := w.GetReaderAddresses()
	if len(h.cfg.Readers) > 0 {
		addrs = h.cfg.Readers
	}
	if len(addrs) == 0 {
		return errors.New("welcome: no reader addresses")
	}
	if h.readers == nil || fmt.Sprint(addrs) != fmt.Sprint(h.addrs) {
		if h.readers != nil {
			h.readers.Close()
		}
		rc, err := reader.NewClient(reader.ClientConfig{Addresses: addrs, Token: h.cfg.ReaderToken, TLS: nil, MaxAttempts: 8})
		if err != nil {
			return err
		}
		h.readers, h.addrs = rc, addrs
	}
	h.welcome, h.feats = w, f
	return nil
}

func (h *host) scaling() buffer.Scaling {
	s := buffer.Scaling{Min: int(h.welcome.GetMinInFlight()), Max: int(h.welcome.GetMaxInFlight())}
	if h.cfg.InFlight.Max > 0 {
		s = h.cfg.InFlight
	}
	s.EnsureDefaults()
	return s
}

// startAttempt begins an epoch attempt: a fresh buffer, the in-flight
// scaler and the batch builder.
func (h *host) startAttempt(ctx context.Context, id uint64, send func(*trainerv1.HostMessage)) *hostAttempt {
	w := h.welcome
	actx, cancel := context.WithCancel(ctx)
	s := h.scaling()
	// The buffer holds at least a batch: the batch builder waits for a whole
	// one (a controller validates this; an older one may not have).
	capacity := max(int(w.GetBufferExamples()), int(w.GetBatchSize()))
	at := &hostAttempt{id: id, ctx: actx, cancel: cancel, buf: buffer.New(h.feats, capacity),
		changed: make(chan struct{}), credits: int(w.GetCredits()), target: s.Min}
	at.wg.Add(2)
	go h.scale(at, s, send)
	go h.batches(at, send)
	return at
}

// scale keeps the in-flight units at the target buffer.Decide sets from
// the buffer's fullness (paper IV.B, "Horizontal auto-scaling").
func (h *host) scale(at *hostAttempt, s buffer.Scaling, send func(*trainerv1.HostMessage)) {
	defer at.wg.Done()
	for {
		at.mu.Lock()
		want := 0
		if !at.drain && !at.requested && at.inflight < at.target {
			want = at.target - at.inflight
			at.requested = true
		}
		at.mu.Unlock()
		if want > 0 {
			send(&trainerv1.HostMessage{Msg: &trainerv1.HostMessage_Request{Request: &trainerv1.RequestUnits{Attempt: at.id, Max: uint32(want)}}})
		}
		select {
		case <-at.ctx.Done():
			return
		case <-h.cfg.Clock.After(h.cfg.DecideInterval):
		}
		added, consumed, buffered := at.buf.Counters()
		at.mu.Lock()
		at.target = buffer.Decide(s, buffer.Observation{Buffered: buffered, Capacity: at.buf.Capacity(),
			Added: added, Consumed: consumed, InFlight: at.target})
		at.mu.Unlock()
	}
}

// readUnit streams one unit from the readers into the buffer. The unit's
// id names its block version (blockref.Ref's text), parsed once here: the
// buffer attributes rows to the Ref, and the host's messages name it as the
// controller did. Rows skip names (a compacted block's rows of parts the
// job trained before the compaction, issue 28) are read and not trained,
// and the unit's rows are the others.
// minReaderWait is the shortest wait on a reader a host reports: shorter
// gaps are the stream's ordinary pace, and reporting each would cost a
// message per batch.
const minReaderWait = 5 * time.Millisecond

func (h *host) readUnit(at *hostAttempt, u *readerv1.WorkUnit, skip *trainerv1.UnitSkip, send func(*trainerv1.HostMessage)) {
	defer at.wg.Done()
	ref := blockref.Parse(u.GetUnitId())
	var rows int64
	fail := func(err error) {
		if at.ctx.Err() != nil {
			return
		}
		h.log.Warn("unit failed", "unit", ref.String(), "err", err)
		send(&trainerv1.HostMessage{Msg: &trainerv1.HostMessage_UnitFailed{UnitFailed: &trainerv1.UnitFailed{
			Attempt: at.id, UnitId: ref.String(), Pending: reader.IsMemoPending(err), Error: err.Error()}}})
	}
	label := h.welcome.GetLabelColumn()
	// What the read waited on its reader (issue 30): from asking for rows
	// (the read's start, or the last batch put in the buffer: time
	// blocked on a full buffer is not the reader's) to receiving them.
	asked, first := h.cfg.Clock.Now(), true
	retries := h.readers.Stats().Retries
	waited := func(end time.Time) {
		kind := stall.ReaderSend
		if first {
			kind = stall.ReaderFetch
		}
		if r := h.readers.Stats().Retries; r != retries {
			kind, retries = stall.ReaderUnavailable, r
		}
		if end.Sub(asked) >= minReaderWait {
			send(&trainerv1.HostMessage{Msg: &trainerv1.HostMessage_ReaderWait{ReaderWait: &trainerv1.ReaderWait{
				Attempt: at.id, UnitId: ref.String(), Kind: string(kind), Start: timestamppb.New(asked), End: timestamppb.New(end)}}})
		}
	}
	for b, err := range h.readers.ReadBatches(at.ctx, u) {
		if err != nil {
			if at.ctx.Err() == nil {
				first = false
				retries = -1 // a failed read is the reader's being unavailable
				waited(h.cfg.Clock.Now())
			}
			fail(err)
			return
		}
		waited(h.cfg.Clock.Now())
		ex := model.NewExamples(h.feats)
		for _, rr := range keptRows(b.StartRow, b.Record.NumRows(), skip) {
			rec := b.Record
			if rr[0] != 0 || rr[1] != rec.NumRows() {
				rec = rec.NewSlice(rr[0], rr[1])
			}
			err := ex.AppendRecord(h.feats, rec, label)
			if rec != b.Record {
				rec.Release()
			}
			if err != nil {
				fail(err)
				return
			}
		}
		if ex.Len() == 0 {
			continue
		}
		if err := at.buf.Put(at.ctx, ref, ex); err != nil {
			return // the attempt ended
		}
		rows += int64(ex.Len())
		asked, first = h.cfg.Clock.Now(), false
	}
	// UnitRead goes out before the in-flight count drops, so it precedes
	// the final batch on the stream.
	send(&trainerv1.HostMessage{Msg: &trainerv1.HostMessage_UnitRead{UnitRead: &trainerv1.UnitRead{Attempt: at.id, UnitId: ref.String(), Rows: rows}}})
	at.update(func() { at.inflight-- })
}

// batches builds fixed-size batches from the buffer and sends them as
// credits allow; once drained with nothing in flight it flushes the rest
// as the final batch.
func (h *host) batches(at *hostAttempt, send func(*trainerv1.HostMessage)) {
	defer at.wg.Done()
	size := int(h.welcome.GetBatchSize())
	var seq uint64
	for {
		bufCh := at.buf.Changed() // before looking, so no change is missed
		at.mu.Lock()
		finishing := at.drain && at.inflight == 0
		ready := at.credits > 0 && (at.buf.Len() >= size || finishing)
		stCh := at.changed
		at.mu.Unlock()
		if !ready {
			select {
			case <-at.ctx.Done():
				return
			case <-stCh:
			case <-bufCh:
			}
			continue
		}
		ex, segs := at.buf.Take(size)
		final := finishing && at.buf.Len() == 0
		at.update(func() { at.credits-- })
		send(&trainerv1.HostMessage{Msg: &trainerv1.HostMessage_Batch{Batch: &trainerv1.Batch{Attempt: at.id, Seq: seq,
			Final: final, UnitRows: segmentsToProto(segs), Examples: examplesToProto(ex)}}})
		seq++
		if final {
			return
		}
	}
}

// keptRows is the rows of a batch of n rows starting at unit row start that
// skip does not name, as [from, to) offsets into the batch.
func keptRows(start, n int64, skip *trainerv1.UnitSkip) [][2]int64 {
	out := [][2]int64{{0, n}}
	if skip == nil {
		return out
	}
	for i, s := range skip.GetStarts() {
		if i >= len(skip.GetEnds()) {
			break
		}
		lo, hi := s-start, skip.GetEnds()[i]-start
		var next [][2]int64
		for _, r := range out {
			if hi <= r[0] || lo >= r[1] {
				next = append(next, r)
				continue
			}
			if lo > r[0] {
				next = append(next, [2]int64{r[0], lo})
			}
			if hi < r[1] {
				next = append(next, [2]int64{hi, r[1]})
			}
		}
		out = next
	}
	return out
}
