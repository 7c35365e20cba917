package objstore

import (
	"net/http"
	"strings"
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
