package sigd

import (
	"context"
	"math"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/internal/clock"
	sigv1 "github.com/sigdata/sig/proto/sig/v1"
)

func newStatsService(t *testing.T) (*statsService, context.Context) {
	t.Helper()
	h := &statsService{s: &Server{cfg: Config{DataDir: t.TempDir()}, clock: clock.Real{}}}
	t.Cleanup(func() { h.close() })
	ctx := auth.WithPrincipal(context.Background(), auth.Principal{Name: "trainer", Role: auth.RoleTrainer, Client: "ctr"})
	return h, ctx
}

// TestFeatureStatsRPC: the service refuses a poisoned report with
// InvalidArgument naming the report and the field (package featstats
// checks every field; TestRejectsPoison there), a bad feature name
// likewise, and serves what was stored.
func TestFeatureStatsRPC(t *testing.T) {
	h, ctx := newStatsService(t)
	good := func() *sigv1.FeatureStatistics {
		return &sigv1.FeatureStatistics{Feature: "ad_id", Model: "ctr", Batches: 10, MeanValency: 2}
	}
	if _, err := h.PutFeatureStatistics(ctx, &sigv1.PutFeatureStatisticsRequest{Stats: []*sigv1.FeatureStatistics{good()}}); err != nil {
		t.Fatal(err)
	}
	bad := good()
	bad.MeanValency = math.NaN()
	noName := good()
	noName.Feature = ""
	for _, c := range []struct {
		st   *sigv1.FeatureStatistics
		want string
	}{{bad, "stats[1].mean_valency"}, {noName, "stats[1].feature"}} {
		_, err := h.PutFeatureStatistics(ctx, &sigv1.PutFeatureStatisticsRequest{Stats: []*sigv1.FeatureStatistics{good(), c.st}})
		if s, _ := status.FromError(err); s.Code() != codes.InvalidArgument || !strings.Contains(s.Message(), c.want) {
			t.Errorf("got %v, want InvalidArgument naming %s", err, c.want)
		}
	}
	resp, err := h.GetFeatureStatistics(ctx, &sigv1.GetFeatureStatisticsRequest{Features: []string{"ad_id", "never"}})
	if err != nil || len(resp.Stats) != 1 || resp.Stats[0].Batches != 10 {
		t.Fatalf("get: %v, %v", resp, err)
	}
}
