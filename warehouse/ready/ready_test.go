package ready_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sigdata/sig/canon"
	"github.com/sigdata/sig/internal/devenv"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/ready"
)

func event(i int) ready.Event {
	id := block.ID(0, block.KafkaRange{Partition: 0, First: int64(i), Last: int64(i)})
	k := canon.Key{0xab, 0xc1, 0x23}
	m := blockref.NewMemo(id, int64(i))
	return ready.Event{ComponentKey: k, Block: m, Source: "ads", Bucket: "sig",
		Key: block.MemoKey(k, m), Rows: int64(100 + i), Bytes: 4096,
		Time: time.Date(2026, 1, 1, 1, 0, i, 0, time.UTC)}
}

func TestPublishSubscribe(t *testing.T) {
	k := devenv.NewKafka(t, devenv.KafkaConfig{Topics: []string{ready.Topic}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := k.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pub := ready.NewPublisher(cl)
	if err := pub.Publish(ctx, event(1)); err != nil {
		t.Fatal(err)
	}
	// A record that is not an event is skipped by subscribers.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: ready.Topic, Value: []byte(`{"nope":1}`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(ctx, event(2)); err != nil {
		t.Fatal(err)
	}
	bad := event(3)
	bad.Key = ""
	if err := pub.Publish(ctx, bad); !errors.Is(err, ready.ErrInvalid) {
		t.Fatalf("publishing an invalid event: %v", err)
	}
	sub, err := ready.NewSubscriber(ready.SubscriberConfig{Brokers: k.Brokers, Group: "trainer", FromStart: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for _, want := range []ready.Event{event(1), event(2)} {
		got, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	}
	if sub.Invalid() != 1 {
		t.Fatalf("invalid count %d", sub.Invalid())
	}
	short, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel2()
	if _, err := sub.Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next with nothing published: %v", err)
	}
}

func TestUnmarshalRejects(t *testing.T) {
	good, err := ready.Marshal(event(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ready.Unmarshal(good); err != nil {
		t.Fatal(err)
	}
	// On the topic the key is hex and the block its warehouse name.
	k := canon.Key{0xab, 0xc1, 0x23}
	if v2, _ := ready.Marshal(event(2)); !strings.Contains(string(v2), `"component_key":"`+k.String()+`"`) ||
		!strings.Contains(string(v2), `.v2"`) {
		t.Errorf("event on the topic: %s", v2)
	}
	hex := k.String()
	for _, b := range []string{``, `[]`, `{"component_key":"a"}`, string(good) + `{}`,
		`{"component_key":"a/b","block_id":"x","bucket":"b","key":"k","rows":1,"bytes":1,"time":"2026-01-01T00:00:00Z"}`,
		`{"component_key":"` + hex + `","block_id":"x/y","bucket":"b","key":"k","rows":1,"bytes":1,"time":"2026-01-01T00:00:00Z"}`,
		`{"component_key":"` + hex + `","block_id":"x","bucket":"b","key":"k","rows":-1,"bytes":1,"time":"2026-01-01T00:00:00Z"}`} {
		if _, err := ready.Unmarshal([]byte(b)); !errors.Is(err, ready.ErrInvalid) {
			t.Errorf("%q: %v, want ErrInvalid", b, err)
		}
	}
}
