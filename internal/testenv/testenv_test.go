package testenv

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func live(t *testing.T, m *MinIO) bool {
	t.Helper()
	c := &http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + m.Endpoint + "/minio/health/live")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func TestMinIOKillRestart(t *testing.T) {
	m := NewMinIO(t)
	if !live(t, m) || !m.Running() {
		t.Fatal("minio not live after start")
	}
	if m.AccessKey == "" || m.SecretKey == "" || len(m.SecretKey) < 16 {
		t.Fatalf("weak credentials %q/%q", m.AccessKey, m.SecretKey)
	}
	m.Kill()
	if live(t, m) || m.Running() {
		t.Fatal("minio still live after Kill")
	}
	if err := m.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !live(t, m) {
		t.Fatal("minio not live after Restart")
	}
	m.Stop()
	if m.Running() {
		t.Fatal("minio running after Stop")
	}
}

func TestKafkaPersistsAcrossRestart(t *testing.T) {
	k := NewKafka(t, KafkaConfig{Topics: []string{"t"}, Partitions: 2})
	ctx := context.Background()
	cl, err := k.Client(kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, kgo.StringRecord("hello")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if err := k.Restart(); err != nil {
		t.Fatal(err)
	}
	cl, err = k.Client(kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var got []string
	for len(got) < 1 && pctx.Err() == nil {
		cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if len(got) != 1 || got[0] != "hello" {
		t.Fatalf("after restart consumed %q, want [hello]", got)
	}
}
