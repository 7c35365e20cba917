package sigd

import (
	"context"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/matching"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
	"github.com/sigdata/sig/versions"
	"github.com/sigdata/sig/warehouse/block"
)

// Versioned blocks (issue 21). The catalog keeps every version of a raw
// block with the snapshot (sequence number) it was added at; sigd
//
//   - resolves read solutions at a snapshot (catalogBlocks.RangeAt; the
//     matching frontend names it and each block's version);
//   - pins snapshots for trainers (PinSnapshot, UnpinSnapshot);
//   - runs package versions' Manager, which follows new versions (the memo
//     entries they need) and collects old ones (with the entries and
//     objects only they had), with the frontend in the catalog's terms
//     (versionsFrontend).

// toBlocks are catalogued raw block versions as the matching frontend
// sees them (matching.BlockOf).
func toBlocks(ms []block.Meta) []matching.Block {
	out := make([]matching.Block, len(ms))
	for i, m := range ms {
		out[i] = matching.BlockOf(m)
	}
	return out
}

// Snapshot is the catalog's current snapshot (matching.SnapshotBlocks).
func (c catalogBlocks) Snapshot() (int64, error) { return c.cat.Snapshot() }

// RangeAt lists the blocks of [from, to) as of snapshot snap.
func (c catalogBlocks) RangeAt(source string, from, to, snap int64) ([]matching.Block, error) {
	ms, err := c.cat.RangeAt(source, from, to, snap)
	if err != nil {
		return nil, err
	}
	return toBlocks(ms), nil
}

// versionsFrontend is the matching frontend as package versions uses it:
// block versions as the catalog lists them.
type versionsFrontend struct{ f *matching.Frontend }

func (v versionsFrontend) BlockChanged(source string, m block.Meta) (matching.Invalidation, error) {
	return v.f.BlockChanged(source, matching.BlockOf(m))
}

func (v versionsFrontend) DropVersions(source string, removed, live []block.Meta) ([]matching.MemoEntry, error) {
	return v.f.DropVersions(source, toBlocks(removed), toBlocks(live))
}

func (v versionsFrontend) Unnamed(removed []matching.MemoEntry) ([]string, error) {
	return v.f.Cache().Unnamed(removed)
}

// DefaultVersionGCEvery and DefaultVersionGCGrace are --version-gc-every's
// and --version-gc-grace's defaults.
const (
	DefaultVersionGCEvery = versions.DefaultGCEvery
	DefaultVersionGCGrace = versions.DefaultGCGrace
)

// checkPinName checks a pin's name for p: 1-128 letters, digits, '.', '_',
// '-' and ':'; a trainer's pins are its client's, "<client>:<anything>".
func checkPinName(p *auth.Principal, name string) error {
	if name == "" || len(name) > 128 {
		return status.Errorf(codes.InvalidArgument, "name: must be 1 to 128 characters, got %d", len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '.' || c == '_' || c == '-' || c == ':' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') {
			continue
		}
		return status.Errorf(codes.InvalidArgument, "name: character %q at byte %d is not allowed (letters, digits, '.', '_', '-', ':')", c, i)
	}
	if p.Role == auth.RoleTrainer && !strings.HasPrefix(name, p.Client+":") {
		return status.Errorf(codes.PermissionDenied, "name: %s's pins start with %q (its client)", p.Name, p.Client+":")
	}
	return nil
}

// PinSnapshot keeps a catalog snapshot's versions from GC under a name.
func (h *sigService) PinSnapshot(ctx context.Context, req *sigv1.PinSnapshotRequest) (*sigv1.PinSnapshotResponse, error) {
	p, err := auth.Require(ctx, auth.RoleTrainer, auth.RoleOperator)
	if err != nil {
		return nil, err
	}
	if err := checkPinName(p, req.GetName()); err != nil {
		return nil, err
	}
	cur, err := h.s.catalog.Snapshot()
	if err != nil {
		return nil, grpcError(err)
	}
	if snap := req.GetSnapshot(); snap < 0 || snap > cur {
		return nil, status.Errorf(codes.InvalidArgument, "snapshot: %d is not in [0, %d] (0 is now, %d the current snapshot)", snap, cur, cur)
	}
	snap, err := h.s.catalog.Pin(req.GetName(), req.GetSnapshot())
	if err != nil {
		return nil, grpcError(err)
	}
	return &sigv1.PinSnapshotResponse{Name: req.GetName(), Snapshot: snap}, nil
}

// UnpinSnapshot removes a pin (none by that name is not an error).
func (h *sigService) UnpinSnapshot(ctx context.Context, req *sigv1.UnpinSnapshotRequest) (*sigv1.UnpinSnapshotResponse, error) {
	p, err := auth.Require(ctx, auth.RoleTrainer, auth.RoleOperator)
	if err != nil {
		return nil, err
	}
	if err := checkPinName(p, req.GetName()); err != nil {
		return nil, err
	}
	if err := h.s.catalog.Unpin(req.GetName()); err != nil {
		return nil, grpcError(err)
	}
	return &sigv1.UnpinSnapshotResponse{}, nil
}
