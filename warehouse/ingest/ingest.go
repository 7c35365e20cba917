package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/internal/topics"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/catalog"
	"github.com/sigdata/sig/warehouse/objstore"
	"github.com/sigdata/sig/warehouse/record"
)

// Dead-letter headers.
const (
	// HeaderDLQReason says what is wrong, for people; HeaderDLQReasonCode
	// is one of DeadLetterReasons, for programs.
	HeaderDLQReason     = "sig-dlq-reason"
	HeaderDLQReasonCode = "sig-dlq-reason-code"
	HeaderDLQTopic      = "sig-dlq-topic"
	HeaderDLQPartition  = "sig-dlq-partition"
	HeaderDLQOffset     = "sig-dlq-offset"
	HeaderDLQTruncated  = "sig-dlq-truncated"
)

// Reasons for dead letters besides the record format's (record.Reason*).
const (
	// ReasonEventTimeRange: event_time outside transform.CheckEventTime's range.
	ReasonEventTimeRange = "event_time_range"
	// ReasonEventTimeAhead: event_time more than MaxEventTimeAhead ahead of
	// the clock.
	ReasonEventTimeAhead = "event_time_ahead"
	// ReasonUnknownEvent: an update or delete naming no stored event of
	// its partition and window (never ingested, already deleted, or not
	// yet arrived).
	ReasonUnknownEvent = "unknown_event"
)

// DeadLetterReasons is every reason code a dead letter can carry: a fixed
// set, so that the metric of dead letters by reason stays small.
var DeadLetterReasons = []string{record.ReasonOversized, record.ReasonContentType, record.ReasonSyntax,
	record.ReasonSchema, ReasonEventTimeRange, ReasonEventTimeAhead, record.ReasonKind, ReasonUnknownEvent}

// reasonIndex maps a reason code to its place in DeadLetterReasons.
func reasonIndex(code string) int {
	for i, r := range DeadLetterReasons {
		if r == code {
			return i
		}
	}
	return -1
}

// The event times ingestion accepts are the ones SIG stores and read ranges
// may cover: transform.CheckEventTime, [1970-01-01, 10000-01-01), whose bounds
// transform's schema.go explains (four-digit years in block ids, window
// arithmetic far from int64's limits). Records outside go to the dead-letter
// topic.

// TopicFor is the raw event topic of a source.
func TopicFor(source string) string { return "raw." + source }

// DeadLetterTopicFor is the dead-letter topic of a source.
func DeadLetterTopicFor(source string) string { return TopicFor(source) + ".dlq" }

// Config configures an Ingester. Zero fields take defaults (EnsureDefaults).
type Config struct {
	// Brokers are the Kafka seed brokers. Required.
	Brokers []string
	// Schema is the source's schema. Default transform.AdsSchema().
	Schema *transform.Schema
	// Topic is the topic consumed. Default raw.<source>.
	Topic string
	// DeadLetterTopic receives malformed records. Default raw.<source>.dlq.
	DeadLetterTopic string
	// Group is the consumer group. Default sig-ingest-<source>.
	Group string
	// InstanceID, if set, makes the consumer a static group member, so a
	// restarted ingester takes its partitions back at once instead of
	// waiting for the old member's session to time out.
	InstanceID string
	// Store and Catalog receive the blocks. Required.
	Store   *objstore.Store
	Catalog *catalog.Catalog
	// Compression is the Arrow IPC buffer compression of the blocks'
	// segments (block.Compression; zero: uncompressed).
	Compression block.Compression
	// BlockBytes seals a buffer when its rows would encode to about this
	// many bytes (Arrow IPC before compression, estimated from the
	// buffer's builders: bufferBytes), and bounds what late rows may be
	// appended to a stored block. Default DefaultBlockBytes, chosen from
	// a measured sweep (its doc comment); negative: no byte bound.
	BlockBytes int64
	// RowsPerBlock, if positive, also seals a buffer when it holds this
	// many rows and changes. Default 0: blocks are cut by bytes (issue 28:
	// a row count is a poor proxy for what a block costs to read, which
	// depends on the bytes and objects a reader fetches).
	RowsPerBlock int
	// SealAfter seals a buffer this long (wall time) after its first row,
	// so that a quiet stream still produces blocks. Default 30s.
	SealAfter time.Duration
	// Window is the event-time window length, a whole number of seconds.
	// Default 1h.
	Window time.Duration
	// Lateness is how far past a window's end the watermark must move
	// before the window is closed. Default 1m.
	Lateness time.Duration
	// MaxEventTimeAhead bounds how far ahead of Clock a record's event time
	// may be; a record further ahead goes to the dead-letter topic (a
	// producer's clock that is off by more than that is broken, and one
	// such record would otherwise close every window before its time).
	// Default 1h.
	MaxEventTimeAhead time.Duration
	// MaxRecordBytes bounds a record value. Default record.DefaultMaxBytes.
	MaxRecordBytes int
	// MaxDeadLetterBytes bounds the value copied to the dead-letter topic.
	// Default 512 KiB.
	MaxDeadLetterBytes int
	// PollRecords bounds the records handled per poll. Default 10000.
	PollRecords int
	// GCInterval is how often ingestion collects the superseded block
	// versions that neither a catalog pin nor "now" sees (catalog.GCUpTo),
	// deleting their objects after the catalog entries. Default 1m;
	// negative: never (another process, sigd, collects).
	GCInterval time.Duration
	// GCGrace keeps a superseded version at least this long after it was
	// superseded, so that a reader that resolved it just before, without a
	// pin, still reads it (catalog.Horizon, as sigd's version GC).
	// Default 10m; negative: none.
	GCGrace time.Duration
	// CompactBytes is the size compaction makes blocks of (compact.go):
	// small blocks of a closed, quiet partition and window are compacted
	// into blocks of at most about this many bytes. Default BlockBytes
	// (DefaultBlockBytes when that is negative).
	CompactBytes int64
	// CompactQuiet is how long a partition and window must have had no
	// new block or version before its small blocks are compacted (every
	// later change would rewrite the compacted block whole). Default
	// DefaultCompactQuiet; negative: never compact.
	CompactQuiet time.Duration
	// CompactEvery is how often the compactor looks for windows to
	// compact. Default DefaultCompactEvery.
	CompactEvery time.Duration
	// BeforeCompactCommit, if set, is called after a compacted block's
	// object is written and before its catalog batch (tests: a process
	// killed there must leave a consistent warehouse).
	BeforeCompactCommit func(ctx context.Context, m block.Meta)
	// Clock times SealAfter and is the present that event times are
	// checked against (MaxEventTimeAhead) and the watermark may not pass.
	// Default the wall clock.
	Clock clock.Clock
	// Logger receives progress and problems. Default: discard.
	Logger *slog.Logger
	// KafkaOpts are appended to the Kafka client options.
	KafkaOpts []kgo.Opt
}

// EnsureDefaults fills zero fields.
func (c *Config) EnsureDefaults() {
	if c.Schema == nil {
		c.Schema = transform.AdsSchema()
	}
	if c.Topic == "" {
		c.Topic = TopicFor(c.Schema.Source)
	}
	if c.DeadLetterTopic == "" {
		c.DeadLetterTopic = DeadLetterTopicFor(c.Schema.Source)
	}
	if c.Group == "" {
		c.Group = "sig-ingest-" + c.Schema.Source
	}
	if c.BlockBytes == 0 {
		c.BlockBytes = DefaultBlockBytes
	}
	if c.RowsPerBlock < 0 {
		c.RowsPerBlock = 0
	}
	if c.SealAfter <= 0 {
		c.SealAfter = 30 * time.Second
	}
	if c.Window <= 0 {
		c.Window = time.Hour
	}
	if c.Lateness < 0 {
		c.Lateness = 0
	} else if c.Lateness == 0 {
		c.Lateness = time.Minute
	}
	if c.MaxEventTimeAhead <= 0 {
		c.MaxEventTimeAhead = time.Hour
	}
	if c.MaxRecordBytes <= 0 {
		c.MaxRecordBytes = record.DefaultMaxBytes
	}
	if c.MaxDeadLetterBytes <= 0 {
		c.MaxDeadLetterBytes = 512 << 10
	}
	if c.PollRecords <= 0 {
		c.PollRecords = 10_000
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.CompactBytes <= 0 {
		c.CompactBytes = c.BlockBytes
		if c.CompactBytes <= 0 {
			c.CompactBytes = DefaultBlockBytes
		}
	}
	if c.CompactQuiet == 0 {
		c.CompactQuiet = DefaultCompactQuiet
	}
	if c.CompactEvery <= 0 {
		c.CompactEvery = DefaultCompactEvery
	}
	if c.GCInterval == 0 {
		c.GCInterval = time.Minute
	}
	if c.GCGrace == 0 {
		c.GCGrace = 10 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Stats counts an Ingester's work since New.
type Stats struct {
	// Records consumed (including skipped and dead-lettered ones).
	Records int64
	// Rows written into blocks: events, in new blocks or appended to
	// versions.
	Rows int64
	// Blocks (version 1) sealed and catalogued, and how many of them are
	// late; LateRows are the events that arrived after their window was
	// closed, in late blocks or appended to a block's new version.
	Blocks, LateBlocks, LateRows int64
	// DeadLetters sent to the dead-letter topic, and by reason (the index
	// of the reason code in DeadLetterReasons).
	DeadLetters         int64
	DeadLettersByReason []int64
	// Versions counts block versions >= 2 written and catalogued, by what
	// made them (a version can count under several): VersionsLate appended
	// late rows, VersionsUpdate overwrote columns, VersionsDelete removed
	// rows. UpdatedRows and DeletedRows count the rows so changed.
	Versions, VersionsLate, VersionsUpdate, VersionsDelete int64
	UpdatedRows, DeletedRows                               int64
	// VersionsCollected are superseded versions removed by GC (their
	// objects deleted).
	VersionsCollected int64
	// Compactions are compacted blocks catalogued, CompactedBlocks the
	// small blocks they replaced (compact.go).
	Compactions, CompactedBlocks int64
	// Skipped records already in catalogued blocks (re-consumed after a
	// restart).
	Skipped int64
	// Commits of offsets.
	Commits int64
	// OffsetResets counts partitions whose committed offset was past the
	// log's end when they were assigned (see the package comment);
	// OffsetsBehind those whose committed offset was before the log's
	// start (records deleted before they were ingested). Both resume at
	// the log start.
	OffsetResets, OffsetsBehind int64
}

// Ingester consumes one source's topic into blocks.
type Ingester struct {
	cfg       Config
	windowLen int64 // µs
	lateness  int64 // µs
	fp        string
	arrowSch  *arrow.Schema
	gen       int64

	mu    sync.Mutex
	parts map[int32]*partState
	// assigned are the partitions the group gave this ingester; parts
	// holds those a record has arrived for since (the compactor loads the
	// others' state from the catalog to compact their windows).
	assigned map[int32]bool
	dec      *record.Decoder
	// now is Clock's time at the start of the current poll (µs): the
	// watermark never passes it, and event times may be at most
	// MaxEventTimeAhead after it.
	now int64

	dlqPending bool
	dlqErr     atomic.Pointer[error]

	records, rows, blocks, lateBlocks, lateRows, deadLetters, skipped, commits       atomic.Int64
	versions, versionsLate, versionsUpdate, versionsDelete, updatedRows, deletedRows atomic.Int64
	versionsCollected                                                                atomic.Int64
	compactions, compactedBlocks                                                     atomic.Int64
	cmp                                                                              compactor // Run's compaction goroutine only

	// GC state (Run's goroutine only): when it last ran, and the grace
	// period's horizon (its Grace is Config.GCGrace).
	lastGC                      time.Time
	gcHorizon                   catalog.Horizon
	offsetResets, offsetsBehind atomic.Int64
	deadLettersByReason         []atomic.Int64
}

// partState is the ingestion state of one assigned partition.
type partState struct {
	partition int32
	next      int64 // offset after the last record handled; -1 before any
	watermark int64 // largest event time seen
	bufs      map[int64]*buffer
	// covered holds, per window, the catalogued offset spans (sorted);
	// maxCovered is the largest covered offset, past which no lookup is
	// needed.
	covered    map[int64][]span
	maxCovered int64
	committed  int64
	// nextClose is the smallest closeAt of the open buffers.
	nextClose int64
}

type span struct{ first, last int64 }

// buffer collects the records of one window of one partition until sealed:
// new events (rows of b), and updates and deletes of events stored in the
// window's blocks or buffered here (changes.go).
type buffer struct {
	window      int64
	late        bool
	first, last int64
	rows        int
	b           *array.RecordBuilder
	ids         []int64 // event_id of each row of b
	openedAt    time.Time
	closeAt     int64 // watermark at which the buffer is sealed

	changes // updates and deletes; zero until the first
}

// release frees the buffer's builders.
func (b *buffer) release() {
	b.b.Release()
	if b.ub != nil {
		b.ub.Release()
	}
}

// New checks cfg and returns an Ingester.
func New(cfg Config) (*Ingester, error) {
	cfg.EnsureDefaults()
	if len(cfg.Brokers) == 0 || cfg.Store == nil || cfg.Catalog == nil {
		return nil, errors.New("ingest: brokers, store and catalog are required")
	}
	if err := cfg.Schema.Validate(); err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	if err := block.ValidateName("source", cfg.Schema.Source); err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	if cfg.Window%time.Second != 0 {
		return nil, fmt.Errorf("ingest: window %v is not a whole number of seconds", cfg.Window)
	}
	return &Ingester{
		cfg:       cfg,
		windowLen: cfg.Window.Microseconds(),
		lateness:  cfg.Lateness.Microseconds(),
		fp:        cfg.Schema.Fingerprint(),
		arrowSch:  cfg.Schema.Arrow(),
		parts:     map[int32]*partState{},
		assigned:  map[int32]bool{},
		dec:       record.NewDecoder(cfg.Schema, cfg.MaxRecordBytes),
		gcHorizon: catalog.Horizon{Grace: cfg.GCGrace},

		deadLettersByReason: make([]atomic.Int64, len(DeadLetterReasons)),
	}, nil
}

// Stats returns the counters.
func (in *Ingester) Stats() Stats {
	st := Stats{Records: in.records.Load(), Rows: in.rows.Load(), Blocks: in.blocks.Load(),
		LateBlocks: in.lateBlocks.Load(), LateRows: in.lateRows.Load(), DeadLetters: in.deadLetters.Load(),
		Skipped: in.skipped.Load(), Commits: in.commits.Load(),
		OffsetResets: in.offsetResets.Load(), OffsetsBehind: in.offsetsBehind.Load(),
		Versions: in.versions.Load(), VersionsLate: in.versionsLate.Load(), VersionsUpdate: in.versionsUpdate.Load(),
		VersionsDelete: in.versionsDelete.Load(), UpdatedRows: in.updatedRows.Load(), DeletedRows: in.deletedRows.Load(),
		VersionsCollected: in.versionsCollected.Load(),
		Compactions:       in.compactions.Load(), CompactedBlocks: in.compactedBlocks.Load(),
		DeadLettersByReason: make([]int64, len(DeadLetterReasons))}
	for i := range st.DeadLettersByReason {
		st.DeadLettersByReason[i] = in.deadLettersByReason[i].Load()
	}
	return st
}

// Source is the source the ingester ingests.
func (in *Ingester) Source() string { return in.cfg.Schema.Source }

// Run consumes until ctx ends (returning nil) or a non-recoverable error
// (returned). Open buffers are not sealed on exit: their records are not
// committed and will be consumed again.
func (in *Ingester) Run(ctx context.Context) error {
	gen, err := in.cfg.Catalog.NextGeneration()
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	in.gen = gen
	log := in.cfg.Logger.With("source", in.cfg.Schema.Source, "topic", in.cfg.Topic, "generation", gen)
	if err := in.cfg.Store.EnsureBucket(ctx); err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	// cl is set once NewClient returns, but the group may assign
	// partitions, and call AdjustFetchOffsetsFn, before that: the callback
	// waits for clReady (a nil client there panicked in kadm).
	var cl *kgo.Client
	clReady := make(chan struct{})
	opts := []kgo.Opt{
		kgo.SeedBrokers(in.cfg.Brokers...),
		kgo.ConsumerGroup(in.cfg.Group),
		kgo.ConsumeTopics(in.cfg.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(in.assignPartitions),
		kgo.OnPartitionsRevoked(in.dropPartitions),
		kgo.OnPartitionsLost(in.dropPartitions),
		kgo.AdjustFetchOffsetsFn(func(ctx context.Context, offs map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
			select {
			case <-clReady:
			case <-ctx.Done():
				return offs, nil
			}
			in.checkCommitted(ctx, cl, log, offs[in.cfg.Topic])
			return offs, nil
		}),
		kgo.FetchMaxBytes(64 << 20),
		kgo.FetchMaxPartitionBytes(16 << 20),
	}
	if in.cfg.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(in.cfg.InstanceID))
	}
	cl, err = kgo.NewClient(append(opts, in.cfg.KafkaOpts...)...)
	if err != nil {
		return fmt.Errorf("ingest: kafka client: %w", err)
	}
	close(clReady)
	defer cl.Close()
	tctx, cancel := context.WithTimeout(ctx, topicsTimeout)
	created, err := topics.Ensure(tctx, cl, in.Topics()...)
	cancel()
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	if len(created) > 0 {
		log.Info("ingest: created topics", "topics", created)
	}
	log.Info("ingest: started", "group", in.cfg.Group)

	if in.cfg.CompactQuiet > 0 {
		cctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			in.compactLoop(cctx, log)
		}()
		defer func() { stop(); <-done }()
	}

	tick := min(in.cfg.SealAfter/4, time.Second)
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, tick)
		fetches := cl.PollRecords(pctx, in.cfg.PollRecords)
		cancel()
		if fetches.IsClientClosed() {
			return nil
		}
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				log.Warn("ingest: fetch error", "partition", p, "err", err)
			}
		})
		err := in.process(ctx, cl, fetches)
		if err == nil {
			err = in.commit(ctx, cl)
		}
		cl.AllowRebalance()
		if err == nil {
			in.collect(ctx, log)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	return nil
}

// process handles one poll's records and seals what is due.
func (in *Ingester) process(ctx context.Context, cl *kgo.Client, fetches kgo.Fetches) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.now = in.cfg.Clock.Now().UnixMicro()
	var err error
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		if err != nil || p.Topic != in.cfg.Topic || len(p.Records) == 0 {
			return
		}
		ps, e := in.partition(p.Partition)
		if e != nil {
			err = e
			return
		}
		for _, r := range p.Records {
			if e := in.handle(ctx, cl, ps, r); e != nil {
				err = e
				return
			}
		}
	})
	if err != nil {
		return err
	}
	// Seal buffers that have waited SealAfter.
	now := in.cfg.Clock.Now()
	for _, ps := range in.parts {
		for _, b := range ps.sortedBuffers() {
			if now.Sub(b.openedAt) >= in.cfg.SealAfter {
				if err := in.seal(ctx, cl, ps, b); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// checkCommitted compares the committed offsets of newly assigned partitions
// (offs, changed in place) with their logs before consumption starts. A
// committed offset past the log's end means the broker no longer has the log
// the offsets were committed in; one before the log's start means records
// were deleted (retention) before they were ingested. Either is logged at
// Error level and counted, and consumption resumes at the log start (the
// package comment says why). If the offsets cannot be listed, nothing is
// changed: the client's own reset (to the log start) still applies.
func (in *Ingester) checkCommitted(ctx context.Context, cl *kgo.Client, log *slog.Logger, offs map[int32]kgo.Offset) {
	committed := map[int32]int64{}
	for p, o := range offs {
		if at := o.EpochOffset().Offset; at >= 0 {
			committed[p] = at
		}
	}
	if len(committed) == 0 {
		return
	}
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, in.cfg.Topic)
	if err == nil {
		err = starts.Error()
	}
	ends, err2 := adm.ListEndOffsets(ctx, in.cfg.Topic)
	if err == nil {
		err = err2
	}
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		log.Warn("ingest: cannot list offsets to check the committed ones", "err", err)
		return
	}
	for p, c := range committed {
		start, ok1 := starts.Lookup(in.cfg.Topic, p)
		end, ok2 := ends.Lookup(in.cfg.Topic, p)
		if !ok1 || !ok2 {
			continue
		}
		switch {
		case c > end.Offset:
			in.offsetResets.Add(1)
			log.Error("ingest: committed offset is past the end of the log: the topic was recreated or the broker lost records; resuming at the log start",
				"partition", p, "committed", c, "log_start", start.Offset, "log_end", end.Offset)
		case c < start.Offset:
			in.offsetsBehind.Add(1)
			log.Error("ingest: committed offset is before the start of the log: records were deleted before they were ingested; resuming at the log start",
				"partition", p, "committed", c, "log_start", start.Offset, "log_end", end.Offset, "lost", start.Offset-c)
		default:
			continue
		}
		offs[p] = kgo.NewOffset().At(start.Offset)
	}
}

// partition returns the state of partition p, loading its catalogued
// coverage on first use after an assignment.
func (in *Ingester) partition(p int32) (*partState, error) {
	if ps := in.parts[p]; ps != nil {
		return ps, nil
	}
	cov, err := in.cfg.Catalog.Covered(in.cfg.Topic, p)
	if err != nil {
		return nil, fmt.Errorf("ingest: partition %d coverage: %w", p, err)
	}
	ps := &partState{partition: p, next: -1, watermark: math.MinInt64, bufs: map[int64]*buffer{},
		covered: map[int64][]span{}, maxCovered: -1, committed: -1, nextClose: math.MaxInt64}
	for _, c := range cov {
		ps.covered[c.Window] = append(ps.covered[c.Window], span{c.First, c.Last})
		ps.maxCovered = max(ps.maxCovered, c.Last)
		ps.watermark = max(ps.watermark, c.MaxEventTime)
	}
	// A block catalogued before event times were checked may hold one far
	// in the future; the restored watermark obeys the same bound as a live
	// one.
	ps.watermark = min(ps.watermark, in.cfg.Clock.Now().UnixMicro())
	in.parts[p] = ps
	return ps, nil
}

// assignPartitions records the partitions the group assigned.
func (in *Ingester) assignPartitions(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, p := range m[in.cfg.Topic] {
		in.assigned[p] = true
	}
}

// dropPartitions forgets revoked or lost partitions: their open buffers are
// uncommitted and will be consumed again by the next owner.
func (in *Ingester) dropPartitions(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, p := range m[in.cfg.Topic] {
		delete(in.assigned, p)
		if ps := in.parts[p]; ps != nil {
			for _, b := range ps.bufs {
				b.release()
			}
		}
		delete(in.parts, p)
	}
}

func (ps *partState) isCovered(window, off int64) bool {
	if off > ps.maxCovered {
		return false
	}
	spans := ps.covered[window]
	i := sort.Search(len(spans), func(i int) bool { return spans[i].last >= off })
	return i < len(spans) && spans[i].first <= off
}

func (ps *partState) sortedBuffers() []*buffer {
	out := make([]*buffer, 0, len(ps.bufs))
	for _, b := range ps.bufs {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].first < out[j].first })
	return out
}

func (in *Ingester) windowOf(t int64) int64 {
	w := t / in.windowLen
	if t%in.windowLen != 0 && t < 0 {
		w--
	}
	return w * in.windowLen
}

// handle processes one record.
func (in *Ingester) handle(ctx context.Context, cl *kgo.Client, ps *partState, r *kgo.Record) error {
	if r.Offset < ps.next {
		return nil // redelivered after a seek; already handled
	}
	ps.next = r.Offset + 1
	in.records.Add(1)
	ct, kind := "", ""
	for _, h := range r.Headers {
		switch {
		case record.IsContentTypeHeader(h.Key):
			ct = string(h.Value)
		case record.IsKindHeader(h.Key):
			kind = string(h.Value)
		}
	}
	k, err := record.ParseKind(kind)
	if err == nil {
		err = in.dec.DecodeKind(k, ct, r.Value)
	}
	if err != nil {
		in.deadLetter(cl, r, record.ReasonOf(err), err)
		return nil
	}
	t := in.dec.EventTime()
	if err := transform.CheckEventTime(t); err != nil {
		in.deadLetter(cl, r, ReasonEventTimeRange, fmt.Errorf("event_time: %w", err))
		return nil
	}
	if t > in.now+in.cfg.MaxEventTimeAhead.Microseconds() {
		in.deadLetter(cl, r, ReasonEventTimeAhead, fmt.Errorf("event_time %s is more than %v ahead of the ingester's clock (%s)",
			transform.FormatMicros(t), in.cfg.MaxEventTimeAhead, transform.FormatMicros(in.now)))
		return nil
	}
	w := in.windowOf(t)
	if ps.isCovered(w, r.Offset) {
		in.skipped.Add(1)
		return nil
	}
	b := ps.bufs[w]
	if b == nil {
		closeAt := w + in.windowLen + in.lateness
		late := ps.watermark >= closeAt
		if late {
			// A closed window's new version stays open for one window
			// of stream time.
			closeAt = ps.watermark + in.windowLen
		}
		b = &buffer{window: w, late: late, first: r.Offset, closeAt: closeAt, openedAt: in.cfg.Clock.Now(),
			b: array.NewRecordBuilder(memory.DefaultAllocator, in.arrowSch)}
		ps.bufs[w] = b
		ps.nextClose = min(ps.nextClose, closeAt)
	}
	if k == record.KindEvent {
		in.dec.AppendTo(b.b)
		b.rows++
		b.ids = append(b.ids, in.dec.EventID())
		if b.live != nil {
			b.live[in.dec.EventID()] = loc{blk: bufferRows, row: int32(b.rows - 1)}
		}
	} else {
		applied, err := in.change(ctx, ps, b, k)
		if err != nil {
			return err
		}
		if !applied {
			in.deadLetter(cl, r, ReasonUnknownEvent, fmt.Errorf("%s of event %d (event_time %s): partition %d has no such event in window %s",
				k, in.dec.EventID(), transform.FormatMicros(t), ps.partition, transform.FormatMicros(w)))
			if b.rows == 0 && b.nchanges == 0 {
				// Opened for this record alone: nothing to seal.
				b.release()
				delete(ps.bufs, w)
			}
			return nil
		}
	}
	b.last = r.Offset
	if in.full(b) {
		if err := in.seal(ctx, cl, ps, b); err != nil {
			return err
		}
	}
	// The watermark is the largest event time seen, but never ahead of the
	// clock: a record stamped ahead of it (a producer's clock skew, within
	// MaxEventTimeAhead) does not close windows that have not ended.
	if wm := min(t, in.now); wm > ps.watermark {
		ps.watermark = wm
		if ps.watermark >= ps.nextClose {
			for _, o := range ps.sortedBuffers() {
				if ps.watermark >= o.closeAt {
					if err := in.seal(ctx, cl, ps, o); err != nil {
						return err
					}
				}
			}
			ps.updateNextClose()
		}
	}
	return nil
}

// updateNextClose recomputes the smallest closeAt of the open buffers, so
// that the per-record watermark check is one comparison.
func (ps *partState) updateNextClose() {
	ps.nextClose = math.MaxInt64
	for _, b := range ps.bufs {
		ps.nextClose = min(ps.nextClose, b.closeAt)
	}
}

// deadLetter sends a malformed record to the dead-letter topic; code is one
// of DeadLetterReasons.
func (in *Ingester) deadLetter(cl *kgo.Client, r *kgo.Record, code string, reason error) {
	in.deadLetters.Add(1)
	if i := reasonIndex(code); i >= 0 {
		in.deadLettersByReason[i].Add(1)
	}
	value := r.Value
	hdrs := append([]kgo.RecordHeader(nil), r.Headers...)
	if len(value) > in.cfg.MaxDeadLetterBytes {
		value = value[:in.cfg.MaxDeadLetterBytes]
		hdrs = append(hdrs, kgo.RecordHeader{Key: HeaderDLQTruncated, Value: []byte(strconv.Itoa(len(r.Value)))})
	}
	hdrs = append(hdrs,
		kgo.RecordHeader{Key: HeaderDLQReason, Value: []byte(reason.Error())},
		kgo.RecordHeader{Key: HeaderDLQReasonCode, Value: []byte(code)},
		kgo.RecordHeader{Key: HeaderDLQTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: HeaderDLQPartition, Value: []byte(strconv.Itoa(int(r.Partition)))},
		kgo.RecordHeader{Key: HeaderDLQOffset, Value: []byte(strconv.FormatInt(r.Offset, 10))},
	)
	in.dlqPending = true
	cl.Produce(context.Background(), &kgo.Record{Topic: in.cfg.DeadLetterTopic, Key: r.Key, Value: value, Headers: hdrs},
		func(_ *kgo.Record, err error) {
			if err != nil {
				in.dlqErr.CompareAndSwap(nil, &err)
			}
		})
}

// topicsTimeout bounds how long Run tries to create its topics.
const topicsTimeout = 30 * time.Second

// Topics are the topics the ingester reads and writes, which Run creates if
// they are missing (internal/topics): the source topic with the broker's
// default partition count, the dead-letter topic with one partition.
func (in *Ingester) Topics() []topics.Spec {
	return []topics.Spec{{Name: in.cfg.Topic, Partitions: -1}, {Name: in.cfg.DeadLetterTopic, Partitions: 1}}
}

// seal writes what buffer b makes (a new block of its events, new versions
// of the window's stored blocks its changes touch: sealVersions), catalogues
// all of it in one batch and forgets the buffer. Object-store failures are
// retried until ctx ends: the objects must be written before anything
// after them is committed.
func (in *Ingester) seal(ctx context.Context, cl *kgo.Client, ps *partState, b *buffer) error {
	defer func() {
		b.release()
		delete(ps.bufs, b.window)
	}()
	if b.nchanges > 0 || b.late {
		return in.sealVersions(ctx, cl, ps, b)
	}
	rec := b.b.NewRecord()
	defer rec.Release()
	full, err := in.write(ctx, in.newBlockMeta(ps, b), rec)
	if err != nil {
		return err
	}
	if err := in.flushDeadLetters(ctx, cl); err != nil {
		return err
	}
	if err := in.cfg.Catalog.Add(full); err != nil {
		return fmt.Errorf("ingest: catalog block %s: %w", full.ID, err)
	}
	in.sealed(ps, b, []block.Meta{full})
	return nil
}

// newBlockMeta is the metadata of a new (version 1) block of b's events.
func (in *Ingester) newBlockMeta(ps *partState, b *buffer) block.Meta {
	kr := block.KafkaRange{Topic: in.cfg.Topic, Partition: ps.partition, First: b.first, Last: b.last}
	id := block.ID(b.window, kr)
	return block.Meta{Key: block.RawKey(in.cfg.Schema.Source, blockref.New(id, 1)), ID: id, Source: in.cfg.Schema.Source,
		WindowStart: b.window, WindowLength: in.windowLen, SchemaFingerprint: in.fp,
		Kafka: &kr, Late: b.late, Generation: in.gen}
}

// write writes one block object, retrying until ctx ends.
func (in *Ingester) write(ctx context.Context, meta block.Meta, rec arrow.Record) (block.Meta, error) {
	var (
		full block.Meta
		err  error
	)
	for {
		full, err = block.WriteWith(ctx, in.cfg.Store, meta, rec, block.EncodeOptions{Compression: in.cfg.Compression})
		if err == nil || ctx.Err() != nil {
			break
		}
		in.cfg.Logger.Warn("ingest: block write failed; retrying", "block", meta.Key, "err", err)
		select {
		case <-ctx.Done():
		case <-in.cfg.Clock.After(time.Second):
		}
	}
	if err != nil {
		return block.Meta{}, fmt.Errorf("ingest: write block %s: %w", meta.Key, err)
	}
	return full, nil
}

// sealed records that b's span is catalogued (in ms) and counts it.
func (in *Ingester) sealed(ps *partState, b *buffer, ms []block.Meta) {
	ps.covered[b.window] = insertSpan(ps.covered[b.window], span{b.first, b.last})
	ps.maxCovered = max(ps.maxCovered, b.last)
	for _, m := range ms {
		if m.Ref().Version() == 1 {
			in.blocks.Add(1)
			in.rows.Add(m.Rows)
			if m.Late {
				in.lateBlocks.Add(1)
				in.lateRows.Add(m.Rows)
			}
			continue
		}
		ch := m.Changes[len(m.Changes)-1]
		in.versions.Add(1)
		if ch.LateRows > 0 {
			in.versionsLate.Add(1)
			in.rows.Add(ch.LateRows)
			in.lateRows.Add(ch.LateRows)
		}
		if ch.UpdatedRows > 0 {
			in.versionsUpdate.Add(1)
			in.updatedRows.Add(ch.UpdatedRows)
		}
		if ch.DeletedRows > 0 {
			in.versionsDelete.Add(1)
			in.deletedRows.Add(ch.DeletedRows)
		}
		in.cfg.Logger.Debug("ingest: new block version", "block", m.Ref().String(),
			"late_rows", ch.LateRows, "updated_rows", ch.UpdatedRows, "deleted_rows", ch.DeletedRows)
	}
}

func insertSpan(spans []span, s span) []span {
	i := sort.Search(len(spans), func(i int) bool { return spans[i].first > s.first })
	spans = append(spans, span{})
	copy(spans[i+1:], spans[i:])
	spans[i] = s
	return spans
}

// commit commits, per partition, the offset before which every record is in
// a catalogued block or acknowledged on the dead-letter topic.
func (in *Ingester) commit(ctx context.Context, cl *kgo.Client) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	offsets := map[int32]kgo.EpochOffset{}
	for p, ps := range in.parts {
		if ps.next < 0 {
			continue
		}
		c := ps.next
		for _, b := range ps.bufs {
			c = min(c, b.first)
		}
		if c > ps.committed {
			offsets[p] = kgo.EpochOffset{Epoch: -1, Offset: c}
		}
	}
	if len(offsets) == 0 {
		return nil
	}
	if err := in.flushDeadLetters(ctx, cl); err != nil {
		return err
	}
	var cerr error
	cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{in.cfg.Topic: offsets},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				cerr = err
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if e := kerr.ErrorForCode(p.ErrorCode); e != nil && cerr == nil {
						cerr = fmt.Errorf("partition %d: %w", p.Partition, e)
					}
				}
			}
		})
	if cerr != nil {
		// Not fatal: the next round commits again (a rebalance in progress,
		// a coordinator move). Nothing is lost; records may be re-read.
		in.cfg.Logger.Warn("ingest: offset commit failed", "err", cerr)
		return nil
	}
	for p, o := range offsets {
		if ps := in.parts[p]; ps != nil {
			ps.committed = o.Offset
		}
	}
	in.commits.Add(1)
	return nil
}
