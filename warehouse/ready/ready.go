package ready

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
)

// Topic is the completeness topic.
const Topic = "sig.memo.ready"

// ErrInvalid is wrapped by errors about malformed events.
var ErrInvalid = errors.New("invalid ready event")

// Event announces that a memoized block is ready to read.
type Event struct {
	// ComponentKey is the Merkle key of the memoized component (64 hex
	// digits on the topic; decoding parses it, canon.Key.UnmarshalText).
	ComponentKey canon.Key `json:"component_key"`
	// Block is the memo block: the raw block the memoized block is
	// row-aligned with and the input version of its data ("<id>" or
	// "<id>.v<N>" on the topic).
	Block blockref.Memo `json:"block_id"`
	// Source is the raw event source.
	Source string `json:"source,omitempty"`
	// Bucket and Key locate the object: a pack (issue 28), whose column
	// Column holds the block's data, or, without a column, an object of
	// the component alone (block.MemoKey), as written before packs.
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	Column string `json:"column,omitempty"`
	// Rows and Bytes describe the object.
	Rows  int64 `json:"rows"`
	Bytes int64 `json:"bytes"`
	// Time is when the block became ready.
	Time time.Time `json:"time"`
}

// Validate checks an event's fields.
func (e *Event) Validate() error {
	if e.ComponentKey == (canon.Key{}) {
		return fmt.Errorf("%w: no component key", ErrInvalid)
	}
	if err := block.ValidateName("block id", e.Block.ID()); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if e.Bucket == "" || e.Key == "" {
		return fmt.Errorf("%w: bucket and key are required", ErrInvalid)
	}
	if e.Rows < 0 || e.Bytes < 0 {
		return fmt.Errorf("%w: negative rows or bytes", ErrInvalid)
	}
	if e.Time.IsZero() {
		return fmt.Errorf("%w: no time", ErrInvalid)
	}
	return nil
}

// Marshal validates and encodes an event.
func Marshal(e Event) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	e.Time = e.Time.UTC()
	return json.Marshal(e)
}

// Unmarshal decodes and validates an event; unknown fields are errors.
func Unmarshal(b []byte) (Event, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var e Event
	if err := dec.Decode(&e); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if dec.More() {
		return Event{}, fmt.Errorf("%w: trailing data", ErrInvalid)
	}
	return e, e.Validate()
}

// Publisher produces ready events.
type Publisher struct {
	cl    *kgo.Client
	topic string
}

// NewPublisher publishes through cl (owned by the caller) to Topic.
func NewPublisher(cl *kgo.Client) *Publisher { return &Publisher{cl: cl, topic: Topic} }

// Publish sends e and waits for the broker's acknowledgement.
func (p *Publisher) Publish(ctx context.Context, e Event) error {
	v, err := Marshal(e)
	if err != nil {
		return err
	}
	r := &kgo.Record{Topic: p.topic, Key: []byte(e.ComponentKey.String()), Value: v}
	if err := p.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		return fmt.Errorf("ready: publish %s/%s: %w", e.ComponentKey, e.Block, err)
	}
	return nil
}

// SubscriberConfig configures a Subscriber.
type SubscriberConfig struct {
	// Brokers are the Kafka seed brokers. Required.
	Brokers []string
	// Group, if set, consumes as that consumer group (committing
	// automatically), so a restarted subscriber resumes where it stopped.
	// Without a group every subscriber sees every event.
	Group string
	// FromStart reads the topic from its beginning when there is no
	// committed offset; otherwise only events published from now on.
	FromStart bool
	// KafkaOpts are appended to the client options.
	KafkaOpts []kgo.Opt
}

// Subscriber consumes ready events.
type Subscriber struct {
	cl      *kgo.Client
	pending []*kgo.Record
	invalid atomic.Int64
}

// NewSubscriber returns a subscriber; Close it when done.
func NewSubscriber(cfg SubscriberConfig) (*Subscriber, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("ready: brokers are required")
	}
	reset := kgo.NewOffset().AtEnd()
	if cfg.FromStart {
		reset = kgo.NewOffset().AtStart()
	}
	opts := []kgo.Opt{kgo.SeedBrokers(cfg.Brokers...), kgo.ConsumeTopics(Topic), kgo.ConsumeResetOffset(reset)}
	if cfg.Group != "" {
		opts = append(opts, kgo.ConsumerGroup(cfg.Group))
	}
	cl, err := kgo.NewClient(append(opts, cfg.KafkaOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("ready: %w", err)
	}
	return &Subscriber{cl: cl}, nil
}

// Next returns the next valid event, waiting until one arrives or ctx ends.
// Invalid records are skipped (see Invalid).
func (s *Subscriber) Next(ctx context.Context) (Event, error) {
	for {
		for len(s.pending) > 0 {
			r := s.pending[0]
			s.pending = s.pending[1:]
			e, err := Unmarshal(r.Value)
			if err != nil {
				s.invalid.Add(1)
				continue
			}
			return e, nil
		}
		fetches := s.cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return Event{}, err
		}
		if fetches.IsClientClosed() {
			return Event{}, errors.New("ready: subscriber closed")
		}
		fetches.EachRecord(func(r *kgo.Record) { s.pending = append(s.pending, r) })
	}
}

// Invalid is the number of records skipped because they were not valid
// events.
func (s *Subscriber) Invalid() int64 { return s.invalid.Load() }

// Close closes the subscriber's client.
func (s *Subscriber) Close() { s.cl.Close() }
