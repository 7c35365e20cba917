package sigd

import (
	"context"
	"encoding/base64"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/matching"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/catalog"
)

// catalogBlocks lists raw blocks for the matching frontend from the
// warehouse catalog.
type catalogBlocks struct{ cat *catalog.Catalog }

// Range lists the blocks of [from, to) now, each at its newest version
// (matching.BlockOf, as RangeAt: both keep each block's version and column
// versions).
func (c catalogBlocks) Range(source string, from, to int64) ([]matching.Block, error) {
	metas, err := c.cat.Range(source, from, to)
	if err != nil {
		return nil, err
	}
	return toBlocks(metas), nil
}

// Pages of ListBlocks.
const (
	defaultBlockPage = 1000
	maxBlockPage     = 10_000
)

// ListBlocks pages through the raw block catalog, which sigd holds open (a
// Pebble store has one process at a time, so `sigctl warehouse list` of a
// live service reads it here). Clients, trainers and operators may list:
// raw blocks are shared by every pipeline, not a client's, and read
// solutions already show any client the blocks of its range.
func (h *sigService) ListBlocks(ctx context.Context, req *sigv1.ListBlocksRequest) (*sigv1.ListBlocksResponse, error) {
	if _, err := auth.Require(ctx, auth.RoleClient, auth.RoleOperator, auth.RoleTrainer); err != nil {
		return nil, err
	}
	size := int(req.GetPageSize())
	if size == 0 {
		size = defaultBlockPage
	}
	size = min(size, maxBlockPage)
	src, after, err := parseBlockPageToken(req.GetPageToken())
	if err != nil {
		return nil, err
	}
	sources := []string{req.GetSource()}
	if req.GetSource() == "" {
		if sources, err = h.s.catalog.Sources(); err != nil {
			return nil, grpcError(err)
		}
	} else if src != "" && src != req.GetSource() {
		return nil, status.Errorf(codes.InvalidArgument, "page_token: continues a listing of source %q, not %q", src, req.GetSource())
	}
	// One block more than the page, to know whether another page follows.
	var metas []block.Meta
	for _, s := range sources {
		if s < src {
			continue // listed on earlier pages
		}
		from := ""
		if s == src {
			from = after
		}
		ms, err := h.s.catalog.BlocksAfter(s, from, size+1-len(metas))
		if err != nil {
			return nil, grpcError(err)
		}
		if metas = append(metas, ms...); len(metas) > size {
			break
		}
	}
	out := &sigv1.ListBlocksResponse{}
	if len(metas) > size {
		metas = metas[:size]
		last := metas[size-1]
		out.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(last.Source + "\x00" + last.ID))
	}
	for _, m := range metas {
		out.Blocks = append(out.Blocks, rawBlockProto(m))
	}
	return out, nil
}

// parseBlockPageToken reads a ListBlocks page token: the source and id of
// the last block listed.
func parseBlockPageToken(tok string) (source, after string, err error) {
	if tok == "" {
		return "", "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	source, after, ok := strings.Cut(string(b), "\x00")
	if err != nil || !ok || source == "" || after == "" {
		return "", "", status.Errorf(codes.InvalidArgument, "page_token: %q is not a token ListBlocks returned", tok)
	}
	return source, after, nil
}

func rawBlockProto(m block.Meta) *sigv1.RawBlock {
	b := &sigv1.RawBlock{Source: m.Source, BlockId: m.ID, RawObject: m.Key, Rows: m.Rows, Bytes: m.Size,
		Events: &sigv1.EventRange{StartMicros: m.MinEventTime, EndMicros: m.MaxEventTime + 1},
		Window: &sigv1.EventRange{StartMicros: m.WindowStart, EndMicros: m.WindowStart + m.WindowLength},
		Late:   m.Late, Generation: m.Generation, Version: m.Ref().Version(), Snapshot: m.Seq}
	if k := m.Kafka; k != nil {
		b.KafkaTopic, b.KafkaPartition, b.KafkaFirstOffset, b.KafkaLastOffset = k.Topic, k.Partition, k.First, k.Last
	}
	return b
}
