package objstore

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestSignGETExample is AWS's worked example of a signed GET ("Example: GET
// Object", https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html):
// the first ten bytes of examplebucket's test.txt.
func TestSignGETExample(t *testing.T) {
	s := &sigV4{accessKey: "AKIAIOSFODNN7EXAMPLE", secretKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", region: "us-east-1"}
	now := time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC)
	for i := range 2 { // the second signature uses the cached signing key
		req, err := http.NewRequest(http.MethodGet, "http://examplebucket.s3.amazonaws.com/test.txt", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Range", "bytes=0-9")
		s.signGET(req, now)
		want := "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request," +
			"SignedHeaders=host;range;x-amz-content-sha256;x-amz-date," +
			"Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
		if got := req.Header.Get("Authorization"); got != want {
			t.Fatalf("signature %d:\n got %s\nwant %s", i, got, want)
		}
		if got := req.Header.Get("X-Amz-Date"); got != "20130524T000000Z" {
			t.Fatalf("x-amz-date %s", got)
		}
	}
	// A new day derives a new key.
	req, _ := http.NewRequest(http.MethodGet, "http://examplebucket.s3.amazonaws.com/test.txt", nil)
	req.Header.Set("Range", "bytes=0-9")
	s.signGET(req, now.Add(24*time.Hour))
	if got := req.Header.Get("Authorization"); !strings.Contains(got, "/20130525/") || strings.Contains(got, "f0e8bdb8") {
		t.Fatalf("next day's signature: %s", got)
	}
}

func TestInfoFromHeader(t *testing.T) {
	h := http.Header{}
	h.Set("ETag", `"abc123"`)
	h.Set("Last-Modified", "Wed, 21 Oct 2026 07:28:00 GMT")
	h.Set("X-Amz-Meta-Sig-Crc32c", "0a0b0c0d")
	h.Set("X-Amz-Meta-Block-Id", "b7")
	h.Set("X-Amz-Request-Id", "r")
	info := infoFromHeader("k", 42, h)
	if info.Key != "k" || info.Size != 42 || info.ETag != "abc123" || !info.HasChecksum || info.Checksum != 0x0a0b0c0d ||
		info.LastModified != time.Date(2026, 10, 21, 7, 28, 0, 0, time.UTC) || len(info.Metadata) != 1 || info.Metadata["Block-Id"] != "b7" {
		t.Fatalf("info %+v", info)
	}
	for _, bad := range []string{"0a0b0c0", "0a0b0c0d0", "zzzzzzzz"} {
		h.Set("X-Amz-Meta-Sig-Crc32c", bad)
		if info := infoFromHeader("k", 42, h); info.HasChecksum {
			t.Fatalf("checksum %q accepted", bad)
		}
	}
}

func TestContentRange(t *testing.T) {
	for _, c := range []struct {
		h                  string
		first, last, total int64
		ok                 bool
	}{
		{"bytes 0-9/20", 0, 9, 20, true},
		{"bytes 7-7/8", 7, 7, 8, true},
		{"bytes 3-9/*", 3, 9, -1, true},
		{"bytes 0-9/9", 0, 0, 0, false}, // last past the total
		{"bytes 9-0/20", 0, 0, 0, false},
		{"bytes -1-3/20", 0, 0, 0, false},
		{"bytes 0-9", 0, 0, 0, false},
		{"items 0-9/20", 0, 0, 0, false},
		{"", 0, 0, 0, false},
	} {
		f, l, tot, ok := contentRange(c.h)
		if ok != c.ok || ok && (f != c.first || l != c.last || tot != c.total) {
			t.Errorf("contentRange(%q) = %d, %d, %d, %v; want %d, %d, %d, %v", c.h, f, l, tot, ok, c.first, c.last, c.total, c.ok)
		}
	}
}

// TestRangeNotHonoured: a server (or proxy) that answers a ranged GET with
// other bytes than those asked (200 with the object from its start, or a
// 206 of another range) is an error at once, never data.
func TestRangeNotHonoured(t *testing.T) {
	obj := []byte("0123456789abcdefghij")
	var mode atomic.Int32
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		switch mode.Load() {
		case 0: // ignore Range
			w.Write(obj)
		case 1: // another range of the same length
			w.Header().Set("Content-Range", "bytes 0-9/20")
			w.WriteHeader(http.StatusPartialContent)
			w.Write(obj[:10])
		case 2: // a suffix that does not end at the object's end
			w.Header().Set("Content-Range", "bytes 5-9/20")
			w.WriteHeader(http.StatusPartialContent)
			w.Write(obj[5:10])
		}
	}))
	defer srv.Close()
	s, err := New(Config{Endpoint: strings.TrimPrefix(srv.URL, "http://"), AccessKey: "a", SecretKey: "b", Bucket: "bk",
		RetryFor: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// A 200 is the range when the range is the whole object.
	mode.Store(0)
	if got, err := getRange(ctx, s, "k", 0, int64(len(obj))); err != nil || string(got) != string(obj) {
		t.Fatalf("the whole object as a range, answered 200: %q %v", got, err)
	}
	for m, call := range []func() error{
		func() error { _, err := getRange(ctx, s, "k", 7, 13); return err },
		func() error { _, err := getRange(ctx, s, "k", 7, 10); return err },
		func() error { _, _, err := getSuffix(ctx, s, "k", 5); return err },
	} {
		mode.Store(int32(m))
		requests.Store(0)
		err := call()
		if err == nil {
			t.Fatalf("mode %d: wrong bytes accepted", m)
		}
		if n := requests.Load(); n != 1 {
			t.Fatalf("mode %d: %d requests, want 1 (not retried): %v", m, n, err)
		}
	}
}

// TestTLSFailureNotRetried: a certificate the client does not trust is
// configuration, failed at once rather than retried for RetryFor.
func TestTLSFailureNotRetried(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	s, err := New(Config{Endpoint: strings.TrimPrefix(srv.URL, "https://"), AccessKey: "a", SecretKey: "b", Bucket: "bk",
		Secure: true, RetryFor: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = getRange(context.Background(), s, "k", 0, 4)
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("get from an untrusted server: %v", err)
	}
	if st := s.Stats(); st.Retries != 0 || time.Since(start) > 5*time.Second {
		t.Fatalf("%d retries in %v: %v", st.Retries, time.Since(start), err)
	}
}
