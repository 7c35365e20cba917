package devenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// TestS3TrafficCountsWhatTheServerServed: a few PUTs, GETs (whole, ranged
// and of a missing key), HEADs, a LIST and a DELETE against a real MinIO,
// and the difference of two scrapes around them is exactly those requests,
// by API, with the object bytes both ways; a scrape right after shows
// nothing new (scrapes are not S3 requests, and the counters are not
// cached); wrong keys are refused.
func TestS3TrafficCountsWhatTheServerServed(t *testing.T) {
	m := NewMinIO(t)
	ctx := context.Background()
	c, err := minio.New(m.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(m.AccessKey, m.SecretKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MakeBucket(ctx, "traffic", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	before, err := m.S3Traffic(ctx)
	if err != nil {
		t.Fatal(err)
	}

	const size, puts, gets, heads = 100_000, 3, 2, 4
	body := bytes.Repeat([]byte("x"), size)
	for i := range puts {
		if _, err := c.PutObject(ctx, "traffic", fmt.Sprintf("o%d", i), bytes.NewReader(body), size, minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(key string, opts minio.GetObjectOptions) (int64, error) {
		o, err := c.GetObject(ctx, "traffic", key, opts)
		if err != nil {
			return 0, err
		}
		defer o.Close()
		return io.Copy(io.Discard, o)
	}
	for range gets {
		if n, err := get("o0", minio.GetObjectOptions{}); err != nil || n != size {
			t.Fatalf("get: %d bytes, %v", n, err)
		}
	}
	var ranged minio.GetObjectOptions
	ranged.SetRange(10, 1009)
	if n, err := get("o1", ranged); err != nil || n != 1000 {
		t.Fatalf("ranged get: %d bytes, %v", n, err)
	}
	if _, err := get("missing", minio.GetObjectOptions{}); err == nil {
		t.Fatal("a GET of a missing key succeeded")
	}
	for range heads {
		if _, err := c.StatObject(ctx, "traffic", "o2", minio.StatObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for o := range c.ListObjects(ctx, "traffic", minio.ListObjectsOptions{}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
	}
	if err := c.RemoveObject(ctx, "traffic", "o2", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}

	after, err := m.S3Traffic(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := after.Sub(before)
	want := map[string]int64{"PutObject": puts, "GetObject": gets + 2, "HeadObject": heads, "ListObjectsV2": 1, "DeleteObject": 1}
	if !maps.Equal(d.Requests, want) || d.Total() != puts+gets+2+heads+2 {
		t.Errorf("requests %v (total %d), want %v", d.Requests, d.Total(), want)
	}
	if !maps.Equal(d.Errors, map[string]int64{"GetObject": 1}) {
		t.Errorf("errors %v, want the missing key's GetObject", d.Errors)
	}
	// Bodies plus what the answers and requests carry besides (a listing,
	// an error document): a few hundred bytes a request at most.
	const slack = 16 << 10
	if sent := int64(gets*size + 1000); d.SentBytes < sent || d.SentBytes > sent+slack {
		t.Errorf("sent %d bytes, want the %d of the GETs' bodies and a little", d.SentBytes, sent)
	}
	if recv := int64(puts * size); d.ReceivedBytes < recv || d.ReceivedBytes > recv+slack {
		t.Errorf("received %d bytes, want the %d of the PUTs' bodies and a little", d.ReceivedBytes, recv)
	}

	again, err := m.S3Traffic(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if z := again.Sub(after); z.Total() != 0 || z.SentBytes != 0 || z.ReceivedBytes != 0 {
		t.Errorf("scrapes alone moved the counters: %+v", z)
	}
	if _, err := ScrapeS3Traffic(ctx, m.Endpoint, m.AccessKey, m.SecretKey+"x"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("a token signed with the wrong key: %v, want 403", err)
	}
}

// TestParseS3Traffic: the text format's samples of type s3 are summed by
// API; other types, comments and other metrics are left out; label values
// may hold escapes; a missing counter is 0 (MinIO leaves out those at 0);
// a malformed sample is an error.
func TestParseS3Traffic(t *testing.T) {
	const text = `# HELP minio_api_requests_total Total number of requests
# TYPE minio_api_requests_total counter
minio_api_requests_total{name="GetObject",server="127.0.0.1:9000",type="s3"} 1.2e+06
minio_api_requests_total{name="PutObject",server="127.0.0.1:9000",type="s3"} 7
minio_api_requests_total{name="ServerInfo",server="127.0.0.1:9000",type="admin"} 99
minio_api_requests_total{name="Odd\"Name\\",server="a,b",type="s3"} 2 1700000000000
minio_api_requests_errors_total{name="GetObject",server="127.0.0.1:9000",type="s3"} 3
minio_api_requests_4xx_errors_total{name="GetObject",server="127.0.0.1:9000",type="s3"} 3
minio_api_requests_ttfb_seconds_distribution{le="0.050",name="GetObject",server="127.0.0.1:9000",type="s3"} 1000
minio_api_requests_traffic_received_bytes{server="127.0.0.1:9000",type="s3"} 700
minio_api_requests_traffic_sent_bytes{server="127.0.0.1:9000",type="s3"} 123456789
minio_api_requests_traffic_sent_bytes{server="127.0.0.1:9000",type="admin"} 5
`
	got, err := ParseS3Traffic(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"GetObject": 1_200_000, "PutObject": 7, `Odd"Name\`: 2}
	if !maps.Equal(got.Requests, want) || !maps.Equal(got.Errors, map[string]int64{"GetObject": 3}) ||
		got.SentBytes != 123456789 || got.ReceivedBytes != 700 {
		t.Errorf("%+v", got)
	}
	if got, err := ParseS3Traffic(strings.NewReader("")); err != nil || got.Total() != 0 || got.SentBytes != 0 {
		t.Errorf("an empty scrape: %+v, %v", got, err)
	}
	if _, err := ParseS3Traffic(strings.NewReader("minio_api_requests_total{name=\"GetObject,type=\"s3\"} 1\n")); err == nil {
		t.Error("a malformed sample was read")
	}
}
