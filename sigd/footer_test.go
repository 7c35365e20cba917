package sigd_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sigdata/sig/eviction"
	"github.com/sigdata/sig/matching"
	"github.com/sigdata/sig/reader"
	"github.com/sigdata/sig/sigd"
	"github.com/sigdata/sig/sigd/sigdtest"
	"github.com/sigdata/sig/warehouse/block/blocktest"
	"github.com/sigdata/sig/warehouse/objstore"
)

// damageFooter stores the memo object at key again with d done to its
// footer and the object's checksum (objstore's CRC metadata) computed over
// the damaged bytes, as a writer with that bug stores it.
func damageFooter(t *testing.T, st *objstore.Store, key string, d blocktest.FooterDamage) {
	t.Helper()
	ctx := context.Background()
	data, _, err := st.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := blocktest.DamageFooter(data, d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutChecksummed(ctx, key, bad, objstore.Checksum(bad), nil); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedFooterRepaired (issue 27, item 7): every damage a reader
// refuses reaches sigd's repair, within seconds, however often the block
// was repaired before. A reader reporting to sigd (role reader, as
// cmd/reader --sigd) serves a memo block; its object is damaged, first by
// a rotted value byte, then, each time it has been recomputed and read
// back, by one byte of its footer flipped (a segment's CRC-32C, offset or
// length, the rows, the pack flag, the block id, the format, the member's
// type or name, the JSON's structure, blocktest.PackFooterDamages, as
// workers write packs (issue 28); the footer's CRC-32C and the
// object's checksum written to match, as a buggy writer writes them; and
// one byte rotted under both). Each time the unit answers DataLoss, the
// reader reports it, sigd finds the object corrupt and recomputes the
// block (a new generation, an audit entry naming the reader, a report
// counted repaired), and the unit then reads the bytes it read before.
// Before, the reader remembered a block it had reported for a minute even
// after it read back repaired, so a second damage stayed DataLoss, the
// block READY, until that minute was out.
func TestDamagedFooterRepaired(t *testing.T) {
	w := sigdtest.NewWarehouse(t, sigdtest.WarehouseConfig{Blocks: 1, RowsPerBlock: 300, Seed: 27})
	srv := sigdtest.Start(t, w, sigd.Config{WorkersMin: 1, WorkersMax: 1}, sigd.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ctr := srv.SIG(t, "ctr")
	if _, err := ctr.SubmitGraph(ctx, sigdtest.Submit("ctr", "p", 5, repairGraph, w.All())); err != nil {
		t.Fatal(err)
	}
	sol := sigdtest.WaitComplete(ctx, t, ctr, "ctr", "p")
	q := sigdtest.InputKey(t, sol, "q")
	b0 := w.Blocks[0].ID
	other := memoOf(t, srv, sigdtest.InputKey(t, sol, "price"), b0)
	addr := serveReader(t, srv, reader.Config{Reporter: reader.SIGReporter(srv.SIG(t, "reader"))})
	rc, err := reader.NewClient(reader.ClientConfig{Addresses: []string{addr}, Token: srv.Tokens["trainer"],
		InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	want, err := readUnit(ctx, rc, unitsOf(t, sol)[b0])
	if err != nil {
		t.Fatal(err)
	}

	type damage struct {
		name string
		do   func(m matching.MemoEntry)
	}
	damages := []damage{{"rotted value byte", func(m matching.MemoEntry) { flipValueByte(t, srv.Store(), m.Object, m.Column) }}}
	// Workers write packs (issue 28): a pack's footer damages.
	footerDamages := blocktest.MemoFooterDamages
	if memoOf(t, srv, q, b0).Packed() {
		footerDamages = blocktest.PackFooterDamages
	}
	for _, d := range footerDamages {
		damages = append(damages, damage{"footer: " + d.Name, func(m matching.MemoEntry) { damageFooter(t, srv.Store(), m.Object, d) }})
	}
	for _, d := range damages {
		before := memoOf(t, srv, q, b0)
		d.do(before)
		// The unit of the block as it is now: each repair puts it in a new
		// pack (issue 28).
		unit := unitNow(ctx, t, ctr, "ctr", "p", b0)
		if _, err := readUnit(ctx, rc, unit); status.Code(err) != codes.DataLoss || errorReason(err) != reader.ReasonCorrupt {
			t.Fatalf("%s: reading the damaged block: %v (reason %q), want DataLoss %s", d.name, err, errorReason(err), reader.ReasonCorrupt)
		}
		// A reader reports a block at most once a minute while it fails:
		// a repair that only comes after half of that was held back.
		deadline := time.Now().Add(30 * time.Second)
		for {
			if m := memoOf(t, srv, q, b0); m.State == matching.MemoReady && m.Gen != before.Gen {
				unit = unitNow(ctx, t, ctr, "ctr", "p", b0) // repaired: in its new pack
			}
			got, err := readUnit(ctx, rc, unit)
			if err == nil {
				if !bytes.Equal(got, want) {
					t.Fatalf("%s: the repaired block reads %d bytes, want the %d read before", d.name, len(got), len(want))
				}
				break
			}
			if time.Now().After(deadline) {
				m := memoOf(t, srv, q, b0)
				t.Fatalf("%s: the block still fails 30s after a reader refused it (%v); its entry is %s (generation %d, was %d): sigd was not told",
					d.name, err, m.State, m.Gen, before.Gen)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if m := memoOf(t, srv, q, b0); m.State != matching.MemoReady || m.Gen == before.Gen {
			t.Errorf("%s: entry %+v after the repair, want ready with a new generation (was %d)", d.name, m, before.Gen)
		}
	}

	if o := memoOf(t, srv, other.Component, b0); o.State != matching.MemoReady || o.Gen != other.Gen {
		t.Errorf("another component of the block changed: %+v", o)
	}
	repairs := 0
	for _, e := range auditLog(t, ctx, srv) {
		if e.Who == "reader" && strings.Contains(e.What, "corrupt") && strings.Contains(e.What, b0) &&
			len(e.Components) == 1 && e.Components[0] == q.String() && strings.Contains(e.Why, "sigd found") {
			repairs++
		}
	}
	if repairs != len(damages) {
		t.Errorf("%d audit entries of the reader's reports of block %s, want %d", repairs, b0, len(damages))
	}
	byOutcome := metricByLabel(t, srv, sigd.MetricMemoReports, "outcome")
	if n := byOutcome[eviction.OutcomeRepaired].GetCounter().GetValue(); n != float64(len(damages)) || len(byOutcome) != 1 {
		t.Errorf("%s by outcome %v, want %d repaired and nothing else", sigd.MetricMemoReports, byOutcome, len(damages))
	}
}
