package sigd_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
)

// TestListBlocks: the raw block catalog of a running sigd, page by page, to
// clients, trainers and operators (not to worker tokens); a page token from
// elsewhere is refused naming the field.
func TestListBlocks(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 3, RowsPerBlock: 20})
	srv := sigdtest.Start(t, w, sigd.Config{RemoteWorkers: true}, sigd.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var got []*sigv1.RawBlock
	pages := 0
	req := &sigv1.ListBlocksRequest{PageSize: 2}
	for {
		resp, err := srv.SIG(t, "cvr").ListBlocks(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		got = append(got, resp.Blocks...)
		if resp.NextPageToken == "" {
			break
		}
		req.PageToken = resp.NextPageToken
	}
	if pages != 2 || len(got) != 3 {
		t.Fatalf("%d blocks in %d pages, want 3 in 2", len(got), pages)
	}
	for i, b := range got {
		m := w.Blocks[i]
		if b.Source != "ads" || b.BlockId != m.ID || b.RawObject != m.Key || b.Rows != 20 || b.Bytes != m.Size ||
			b.Events.StartMicros != m.MinEventTime || b.Events.EndMicros != m.MaxEventTime+1 ||
			b.Window.StartMicros != m.WindowStart || b.KafkaTopic != m.Kafka.Topic || b.KafkaLastOffset != m.Kafka.Last ||
			b.Version != 1 || b.Snapshot < 1 {
			t.Errorf("block %d: %v, want %+v", i, b, m)
		}
	}
	for _, who := range []string{"trainer", "operator"} {
		resp, err := srv.SIG(t, who).ListBlocks(ctx, &sigv1.ListBlocksRequest{Source: "ads"})
		if err != nil || len(resp.Blocks) != 3 || resp.NextPageToken != "" {
			t.Errorf("%s: %d blocks, %v", who, len(resp.GetBlocks()), err)
		}
	}
	if _, err := srv.SIG(t, "worker").ListBlocks(ctx, &sigv1.ListBlocksRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("worker token: %v, want PermissionDenied", err)
	}
	// A new version of block 1 is listed at it, with its object and snapshot
	// (issue 21).
	writeVersion(ctx, t, srv.Store(), srv.Catalog(), w.Blocks[1], "click")
	v2, err := srv.Catalog().Get("ads", w.Blocks[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.SIG(t, "operator").ListBlocks(ctx, &sigv1.ListBlocksRequest{Source: "ads"})
	if err != nil || len(resp.Blocks) != 3 {
		t.Fatalf("after a new version: %v, %v", resp, err)
	}
	if b := resp.Blocks[1]; b.Version != 2 || b.RawObject != v2.Key || b.Snapshot != v2.Seq || b.Snapshot <= got[2].Snapshot {
		t.Errorf("block 1 after a new version: %v; want version 2 at %s, snapshot %d", b, v2.Key, v2.Seq)
	}
	_, err = srv.SIG(t, "ctr").ListBlocks(ctx, &sigv1.ListBlocksRequest{PageToken: "not-a-token"})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "page_token") {
		t.Errorf("bad page token: %v, want InvalidArgument naming page_token", err)
	}
}
