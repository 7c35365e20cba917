package devenv

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
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

// TestMinIOETags checks MinIOConfig.RandomETags reaches the server: by
// default a PUT's ETag is the MD5 of the content, as rclone and s3cmd check;
// with RandomETags (--no-compat) it is not.
func TestMinIOETags(t *testing.T) {
	data := bytes.Repeat([]byte("sig memo object "), 4096)
	sum := md5.Sum(data)
	want := hex.EncodeToString(sum[:])
	for _, strict := range []bool{false, true} {
		m, err := StartMinIO(context.Background(), MinIOConfig{Dir: t.TempDir(), RandomETags: !strict})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Stop)
		cl, err := minio.New(m.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(m.AccessKey, m.SecretKey, "")})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := cl.MakeBucket(ctx, "etags", minio.MakeBucketOptions{}); err != nil {
			t.Fatal(err)
		}
		info, err := cl.PutObject(ctx, "etags", "k", bytes.NewReader(data), int64(len(data)),
			minio.PutObjectOptions{DisableContentSha256: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Trim(info.ETag, `"`); (got == want) != strict {
			t.Errorf("strict=%v: ETag %s, MD5 %s", strict, got, want)
		}
		obj, err := cl.GetObject(ctx, "etags", "k", minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(obj)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("strict=%v: read back %d bytes, %v", strict, len(got), err)
		}
		m.Stop()
	}
}

// TestMinIOStartIsNotFooledByAnotherServer: a server that already holds
// the port and answers MinIO's health check (another test's MinIO, with
// other keys) is not taken for the one being started, which cannot bind
// and exits: StartMinIO fails rather than hand out an endpoint whose
// server refuses its keys.
func TestMinIOStartIsNotFooledByAnotherServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	impostor := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/minio/health/ready" {
			return
		}
		http.Error(w, "<Error><Code>InvalidAccessKeyId</Code></Error>", http.StatusForbidden)
	})}
	go impostor.Serve(ln)
	defer impostor.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	m, err := StartMinIO(context.Background(), MinIOConfig{Dir: t.TempDir(), Port: port, StartTimeout: 5 * time.Second})
	if err == nil {
		m.Stop()
		t.Fatalf("StartMinIO on a port another server holds succeeded (endpoint %s)", m.Endpoint)
	}
}
