package ingest_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sigdata/sig/internal/devenv"
	"github.com/sigdata/sig/warehouse/gen"
	"github.com/sigdata/sig/warehouse/ingest"
)

// commitOffset commits offset for partition 0 of raw.ads in the ingestion
// group, as a crashed broker or a recreated topic leave it.
func (e *env) commitOffset(t *testing.T, offset int64) {
	t.Helper()
	cl, err := e.kafka.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "raw.ads", Partition: 0, At: offset, LeaderEpoch: -1})
	resp, err := kadm.NewClient(cl).CommitOffsets(context.Background(), "sig-ingest-ads", os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// ingestCaughtUp runs an ingester (blocks of 400 rows) until it has caught
// up with raw.ads, and returns its stats and its log.
func ingestCaughtUp(t *testing.T, e *env) (ingest.Stats, string) {
	t.Helper()
	logs := &devenv.SyncBuffer{}
	stop := runIngester(t, e, func(c *ingest.Config) {
		c.RowsPerBlock = 400
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	e.waitCaughtUp(t, "sig-ingest-ads", 30*time.Second, nil)
	return stop(), logs.String()
}

// The group's committed offset is past the end of the log, as after kfake
// forgot a topic it had auto-created and a producer created it again: the
// ingester says so at Error level with the numbers, counts it, resumes from
// the log start (every record the log holds is new to the catalog) and
// ingests each event once.
func TestCommittedOffsetPastEnd(t *testing.T) {
	e := newEnv(t, 1)
	e.produce(t, gen.Config{Seed: 12, LateFraction: -1}, 1000)
	e.commitOffset(t, 5000)
	st, out := ingestCaughtUp(t, e)
	t.Logf("stats %+v", st)
	verifyExactlyOnce(t, e.store, e.catalogDir, 1, 1000)
	if !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "committed=5000") || !strings.Contains(out, "log_end=1000") {
		t.Errorf("no error naming the committed offset and the log end in the log:\n%s", out)
	}
	if st.OffsetResets != 1 {
		t.Errorf("stats %+v: want one offset reset", st)
	}
}

// The committed offset is before the start of the log, as when retention
// deleted records that were never ingested: the ingester says how many are
// lost, counts it, and ingests what the log still holds, once.
func TestCommittedOffsetBeforeStart(t *testing.T) {
	e := newEnv(t, 1)
	e.produce(t, gen.Config{Seed: 13, LateFraction: -1}, 1000)
	e.commitOffset(t, 100)
	cl, err := e.kafka.Client()
	if err != nil {
		t.Fatal(err)
	}
	var del kadm.Offsets
	del.Add(kadm.Offset{Topic: "raw.ads", Partition: 0, At: 300, LeaderEpoch: -1})
	resp, err := kadm.NewClient(cl).DeleteRecords(context.Background(), del)
	cl.Close()
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	st, out := ingestCaughtUp(t, e)
	verifyExactlyOnce(t, e.store, e.catalogDir, 301, 700)
	if !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "lost=200") {
		t.Errorf("no error saying 200 records were lost in the log:\n%s", out)
	}
	if st.OffsetsBehind != 1 || st.OffsetResets != 0 {
		t.Errorf("stats %+v: want one partition behind the log start", st)
	}
}
