package reader

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"iter"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	flatbuffers "github.com/google/flatbuffers/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/internal/arrowfile"
	"github.com/sigdata/sig/internal/auth"
	readerv1 "github.com/sigdata/sig/proto/reader/v1"
)

// ClientConfig configures a Client. Zero fields take defaults.
type ClientConfig struct {
	// Addresses are the readers (host:port). Any reader serves any unit;
	// a unit starts on the next address in turn and moves to the following
	// one when its reader fails. Required.
	Addresses []string
	// Token is the bearer token sent with every call (role trainer or
	// operator); empty sends none.
	Token string
	// TLS secures the connections; nil dials without TLS (loopback and
	// tests), which still sends the token.
	TLS *tls.Config
	// MaxAttempts bounds the calls of one unit that make no progress (a call
	// that delivered rows resets the count). Default 6.
	MaxAttempts int
	// InitialBackoff and MaxBackoff bound the wait between attempts (doubling,
	// with jitter). The first retry after a broken stream that delivered
	// rows goes at once to the next reader. Defaults 50ms and 2s.
	InitialBackoff, MaxBackoff time.Duration
	// RetryPending makes pending memo data (IsMemoPending) retryable like a
	// dead reader. By default it is returned at once, so that the host can
	// place a transient training hold and wait for the completion event.
	RetryPending bool
	// MaxMessageBytes bounds one response. Default 256 MiB.
	MaxMessageBytes int
	// DialOptions are added to the client's own.
	DialOptions []grpc.DialOption
}

// Client reads work units from a set of stateless readers, resuming a broken
// stream on another reader from the last row received (paper IV.B: readers
// are stateless, so a reader lost mid-stream costs only a retry).
type Client struct {
	cfg     ClientConfig
	conns   []*grpc.ClientConn
	readers []readerv1.ReaderClient
	next    atomic.Uint64

	attempts, retries, resumes atomic.Int64
}

// NewClient dials (lazily) every address.
func NewClient(cfg ClientConfig) (*Client, error) {
	if len(cfg.Addresses) == 0 {
		return nil, errors.New("reader: ClientConfig.Addresses is empty")
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 6
	}
	if cfg.InitialBackoff <= 0 {
		cfg.InitialBackoff = 50 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 2 * time.Second
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = 256 << 20
	}
	creds := insecure.NewCredentials()
	if cfg.TLS != nil {
		creds = credentials.NewTLS(cfg.TLS)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(cfg.MaxMessageBytes)),
		// Flow-control windows of a few batches, so that a reader streams
		// without waiting for window updates (a host buffers anyway).
		grpc.WithInitialWindowSize(8 << 20), grpc.WithInitialConnWindowSize(16 << 20),
		grpc.WithReadBufferSize(1 << 20)}
	if cfg.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(auth.BearerCredentials{Token: cfg.Token, Insecure: cfg.TLS == nil}))
	}
	opts = append(opts, cfg.DialOptions...)
	c := &Client{cfg: cfg}
	for _, a := range cfg.Addresses {
		conn, err := grpc.NewClient(a, opts...)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("reader: dial %s: %w", a, err)
		}
		c.conns = append(c.conns, conn)
		c.readers = append(c.readers, readerv1.NewReaderClient(conn))
	}
	return c, nil
}

// Close closes every connection.
func (c *Client) Close() error {
	var errs []error
	for _, conn := range c.conns {
		errs = append(errs, conn.Close())
	}
	return errors.Join(errs...)
}

// ClientStats counts a Client's calls since NewClient.
type ClientStats struct {
	// Attempts counts Read calls; Retries those after a failed one;
	// Resumes the retries that continued a unit from a row > 0.
	Attempts, Retries, Resumes int64
}

// Stats returns the counters.
func (c *Client) Stats() ClientStats {
	return ClientStats{Attempts: c.attempts.Load(), Retries: c.retries.Load(), Resumes: c.resumes.Load()}
}

// Batch is one record batch of a unit.
type Batch struct {
	// StartRow is the block row of the batch's first row.
	StartRow int64
	// Record holds the rows; it is valid until the iteration continues
	// (Retain it to keep it longer).
	Record arrow.Record
	// IPC is the batch as received: a complete Arrow IPC stream.
	IPC []byte
}

// Read streams the unit's record batches: event_id, the labels, then one
// column per model input. It retries unavailable readers and broken streams
// (on the next reader, from the first row not yet received) until
// MaxAttempts calls in a row make no progress. Errors carry the gRPC status
// (IsMemoPending recognizes pending memo data). A record is valid until the
// iteration continues.
func (c *Client) Read(ctx context.Context, unit *readerv1.WorkUnit) iter.Seq2[arrow.Record, error] {
	return func(yield func(arrow.Record, error) bool) {
		for b, err := range c.ReadBatches(ctx, unit) {
			if !yield(b.Record, err) || err != nil {
				return
			}
		}
	}
}

// ReadBatches is Read with each batch's position and bytes.
func (c *Client) ReadBatches(ctx context.Context, unit *readerv1.WorkUnit) iter.Seq2[Batch, error] {
	return func(yield func(Batch, error) bool) {
		var (
			next     int64 // first row not yet received
			failures int   // attempts in a row without progress
			backoff  = c.cfg.InitialBackoff
			schema   *arrow.Schema
			addr     = int(c.next.Add(1)-1) % len(c.readers)
		)
		for {
			c.attempts.Add(1)
			progressed, done, err := c.attempt(ctx, addr, unit, &next, &schema, yield)
			if done {
				return
			}
			if progressed {
				failures, backoff = 0, c.cfg.InitialBackoff
			}
			failures++
			if ctx.Err() != nil || !c.retryable(err) || failures >= c.cfg.MaxAttempts {
				if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
					err = fmt.Errorf("%w (after %v)", ctx.Err(), err)
				}
				yield(Batch{}, fmt.Errorf("reader: unit %s block %s at row %d: %w", unit.GetUnitId(), unit.GetBlockId(), next, err))
				return
			}
			c.retries.Add(1)
			if next > 0 {
				c.resumes.Add(1)
			}
			addr = (addr + 1) % len(c.readers)
			if !progressed {
				// Jittered exponential backoff between fruitless attempts.
				d := backoff/2 + rand.N(backoff/2+1)
				backoff = min(2*backoff, c.cfg.MaxBackoff)
				t := time.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
				case <-t.C:
				}
			}
		}
	}
}

// errEarlyEOF: a stream ended without its summary.
var errEarlyEOF = errors.New("stream ended without a summary")

// attempt runs one Read call from *next. done means the iteration is over
// (the unit completed, or the consumer stopped).
func (c *Client) attempt(ctx context.Context, addr int, unit *readerv1.WorkUnit, next *int64, schema **arrow.Schema,
	yield func(Batch, error) bool) (progressed, done bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.readers[addr].Read(ctx, &readerv1.ReadRequest{Unit: unit, StartRow: *next})
	if err != nil {
		return false, false, err
	}
	var crc uint32
	var rows int64
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			return progressed, false, fmt.Errorf("%s: %w", c.cfg.Addresses[addr], errEarlyEOF)
		}
		if err != nil {
			return progressed, false, err
		}
		if s := resp.Summary; s != nil {
			if s.Rows != rows || s.Crc32C != crc || *next != s.BlockRows {
				return progressed, true, yieldErr(yield, status.Errorf(codes.DataLoss,
					"reader %s: summary (rows %d of %d, crc32c %08x) does not match the stream (%d rows to row %d, crc32c %08x)",
					c.cfg.Addresses[addr], s.Rows, s.BlockRows, s.Crc32C, rows, *next, crc))
			}
			return progressed, true, nil
		}
		if resp.StartRow != *next || resp.Rows <= 0 {
			return progressed, true, yieldErr(yield, status.Errorf(codes.DataLoss,
				"reader %s: batch at row %d of %d rows, want row %d", c.cfg.Addresses[addr], resp.StartRow, resp.Rows, *next))
		}
		rec, err := decodeBatch(resp.ArrowIpc)
		if err == nil && rec.NumRows() != resp.Rows {
			err = fmt.Errorf("%d rows, response says %d", rec.NumRows(), resp.Rows)
		}
		if err == nil && *schema != nil && !(*schema).Equal(rec.Schema()) {
			err = fmt.Errorf("schema %s differs from the unit's first batch", rec.Schema())
		}
		if err != nil {
			if rec != nil {
				rec.Release()
			}
			return progressed, true, yieldErr(yield, status.Errorf(codes.DataLoss,
				"reader %s: batch at row %d: %v", c.cfg.Addresses[addr], resp.StartRow, err))
		}
		if *schema == nil {
			*schema = rec.Schema()
		}
		crc = crc32.Update(crc, castagnoli, resp.ArrowIpc)
		rows += resp.Rows
		*next += resp.Rows
		progressed = true
		ok := yield(Batch{StartRow: resp.StartRow, Record: rec, IPC: resp.ArrowIpc}, nil)
		rec.Release()
		if !ok {
			return progressed, true, nil
		}
	}
}

func yieldErr(yield func(Batch, error) bool, err error) error {
	yield(Batch{}, err)
	return err
}

// decodeBatch decodes one response's IPC stream into its record batch.
func decodeBatch(b []byte) (rec arrow.Record, err error) {
	defer func() {
		if r := recover(); r != nil {
			rec, err = nil, fmt.Errorf("undecodable arrow ipc: %v", r)
		}
	}()
	// Arrow's reader allocates what the stream's lengths say before it
	// reads: check them against the bytes first, so that a corrupt
	// response is an error rather than an out-of-memory crash.
	if err := checkFraming(b); err != nil {
		return nil, err
	}
	// The record batch's own buffer lengths size allocations too: a
	// budget of what b can hold (Arrow's reader copies each buffer out of
	// the stream, so a batch needs about len(b) bytes) makes a lie about
	// them a panic (recovered above) rather than an out-of-memory crash.
	alloc := arrowfile.NewBudgetAllocator(int64(2*len(b)+1<<16), "the response")
	r, err := ipc.NewReader(bytes.NewReader(b), ipc.WithAllocator(alloc))
	if err != nil {
		return nil, err
	}
	defer r.Release()
	if !r.Next() {
		if r.Err() != nil {
			return nil, r.Err()
		}
		return nil, errors.New("no record batch")
	}
	rec = r.Record()
	rec.Retain()
	if r.Next() {
		rec.Release()
		return nil, errors.New("more than one record batch")
	}
	return rec, nil
}

// checkFraming walks an IPC stream's messages (continuation marker,
// metadata length, metadata, body) and checks that every metadata and body
// length fits in b and that the stream ends with its end-of-stream marker.
// It panics on a malformed flatbuffer; decodeBatch recovers.
func checkFraming(b []byte) error {
	for pos := 0; ; {
		if len(b)-pos < 8 || binary.LittleEndian.Uint32(b[pos:]) != 0xFFFFFFFF {
			return fmt.Errorf("arrow ipc: no message at byte %d of %d", pos, len(b))
		}
		n := int64(int32(binary.LittleEndian.Uint32(b[pos+4:])))
		pos += 8
		if n == 0 {
			return nil // end of stream
		}
		if n < 0 || n > int64(len(b)-pos) {
			return fmt.Errorf("arrow ipc: message metadata of %d bytes at byte %d of %d", n, pos, len(b))
		}
		meta := b[pos : pos+int(n)]
		pos += int(n)
		// Message.bodyLength is field 3 of the root table.
		tab := flatbuffers.Table{Bytes: meta, Pos: flatbuffers.GetUOffsetT(meta)}
		var body int64
		if o := flatbuffers.UOffsetT(tab.Offset(4 + 2*3)); o != 0 {
			body = tab.GetInt64(o + tab.Pos)
		}
		if body < 0 || body > int64(len(b)-pos) {
			return fmt.Errorf("arrow ipc: message body of %d bytes at byte %d of %d", body, pos, len(b))
		}
		pos += int(body)
	}
}

// retryable reports whether another attempt, on another reader, may
// succeed: the reader was unreachable or died mid-stream.
func (c *Client) retryable(err error) bool {
	if errors.Is(err, errEarlyEOF) {
		return true
	}
	if IsMemoPending(err) {
		return c.cfg.RetryPending
	}
	s, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch s.Code() {
	case codes.Unavailable, codes.Aborted, codes.Internal:
		// Internal: gRPC reports a stream reset by a dying server so.
		return true
	}
	return false
}
