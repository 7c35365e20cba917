package sigd_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"hash/crc32"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/sigdata/sig/sigd"
)

// startDev builds a sigd in development mode (embedded MinIO and kfake) in
// dir, without serving.
func startDev(t *testing.T, dir string) *sigd.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := sigd.New(ctx, sigd.Config{DataDir: dir, Listen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0"},
		sigd.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// TestDevStoreETagsAreMD5: the development store answers what standard S3
// tools check. rclone copy and s3cmd get compare a single-part object's
// ETag with the MD5 of the bytes they received (rclone fails the copy with
// "md5 hash differ", s3cmd warns); an object SIG wrote must pass that check.
func TestDevStoreETagsAreMD5(t *testing.T) {
	srv := startDev(t, t.TempDir())
	ctx := context.Background()
	data := bytes.Repeat([]byte("memo segment bytes "), 10_000)
	if _, err := srv.Store().PutChecksummed(ctx, "memo/etag-check.arrow", data,
		crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)), nil); err != nil {
		t.Fatal(err)
	}
	cfg := srv.Config()
	cl, err := minio.New(cfg.S3Endpoint, &minio.Options{Creds: credentials.NewStaticV4(cfg.S3AccessKey, cfg.S3SecretKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := cl.GetObject(ctx, cfg.S3Bucket, "memo/etag-check.arrow", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	got, err := io.ReadAll(obj)
	if err != nil {
		t.Fatal(err)
	}
	st, err := obj.Stat()
	if err != nil {
		t.Fatal(err)
	}
	sum := md5.Sum(got)
	if etag, want := strings.Trim(st.ETag, `"`), hex.EncodeToString(sum[:]); etag != want {
		t.Fatalf("ETag %s of a SIG-written object, MD5 of its bytes %s: rclone and s3cmd would report corruption", etag, want)
	}
}
