package matching

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/matching/insertion"
	"github.com/sigdata/sig/transform"
	"github.com/sigdata/sig/warehouse/blockref"
)

// versionedBlocks is a SnapshotBlocks over in-package block lists: every
// version of every block with the snapshot (sequence number) it was added
// at, as the warehouse catalog keeps them.
type versionedBlocks struct {
	mu   sync.Mutex
	seq  int64
	ids  []string
	hist map[string][]versionAt // by id, oldest version first
}

type versionAt struct {
	seq int64
	b   Block
}

func (v *versionedBlocks) Snapshot() (int64, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.seq, nil
}

func (v *versionedBlocks) Range(source string, from, to int64) ([]Block, error) {
	s, _ := v.Snapshot()
	return v.RangeAt(source, from, to, s)
}

func (v *versionedBlocks) RangeAt(source string, from, to, snap int64) ([]Block, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []Block
	for _, id := range v.ids {
		var at *Block
		for i := range v.hist[id] {
			if v.hist[id][i].seq <= snap {
				at = &v.hist[id][i].b
			}
		}
		if at != nil && at.MaxEvent >= from && at.MinEvent < to {
			out = append(out, *at)
		}
	}
	return out, nil
}

func (v *versionedBlocks) add(b Block) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.seq++
	id := b.Ref.ID()
	if _, ok := v.hist[id]; !ok {
		v.ids = append(v.ids, id)
	}
	v.hist[id] = append(v.hist[id], versionAt{v.seq, b})
}

func (v *versionedBlocks) newest(id string) Block {
	v.mu.Lock()
	defer v.mu.Unlock()
	h := v.hist[id]
	return h[len(h)-1].b
}

// TestVersions runs testdata/versions.txt: memo entries per (component,
// block, input version), what a new block version invalidates and
// schedules, read solutions at snapshots, and the entries dropped with
// versions nobody sees. Blocks are 100 event-time units each: b000 holds
// [0, 100), b001 [100, 200), and so on.
//
//	blocks n=N                        N raw blocks, version 1, one snapshot each
//	submit client=C pipeline=P from=F to=T [priority=N]
//	<DSL>                             registers a pipeline; its tasks
//	complete                          marks every pending entry ready
//	change block=B (columns=a,b | rows)
//	                                  a new version of B: the columns' values
//	                                  changed (an update), or the row set (late
//	                                  rows or deletions: every column); then
//	                                  BlockChanged, its counts and Enqueue calls
//	solve client=C pipeline=P [snapshot=N]
//	                                  the read solution: snapshot, per input and
//	                                  block the version and state
//	drop block=B keep=1,3             DropVersions of B's other versions
func TestVersions(t *testing.T) {
	var (
		f     *Frontend
		sched *fakeSched
		vb    *versionedBlocks
	)
	schema := transform.AdsSchema()
	short := func(dsl string) string { return strings.TrimPrefix(dsl, "input out = ") }
	tasks := func(from int) string {
		var b strings.Builder
		sched.mu.Lock()
		defer sched.mu.Unlock()
		for _, c := range sched.calls[from:] {
			rec, err := f.Cache().Component(c.comp)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "enqueue %s %s/%s prio=%d: %s\n", c.block, c.client, c.pipeline, c.prio, short(rec.DSL))
		}
		return b.String()
	}
	datadriven.RunTest(t, "testdata/versions.txt", func(t *testing.T, td *datadriven.TestData) string {
		switch td.Cmd {
		case "blocks":
			var n int
			td.ScanArgs(t, "n", &n)
			cache, err := OpenCache(t.TempDir(), CacheOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cache.Close() })
			vb = &versionedBlocks{hist: map[string][]versionAt{}}
			for i := 0; i < n; i++ {
				vb.add(Block{Ref: blockref.New(fmt.Sprintf("b%03d", i), 1), RawObject: fmt.Sprintf("raw/ads/b%03d.arrow", i),
					MinEvent: int64(i * 100), MaxEvent: int64(i*100 + 99), Rows: 100})
			}
			sched = &fakeSched{}
			f = NewFrontend(FrontendConfig{Cache: cache, Blocks: vb, Scheduler: sched,
				Clock: clock.NewFake(time.Unix(1_700_000_000, 0)), Insertion: insertion.Config{MemoizeAll: true},
				Schema: func(string) (*transform.Schema, error) { return schema, nil }})
			return ""
		case "submit":
			var client, pipeline string
			var from, to int64
			var prio int
			td.ScanArgs(t, "client", &client)
			td.ScanArgs(t, "pipeline", &pipeline)
			td.ScanArgs(t, "from", &from)
			td.ScanArgs(t, "to", &to)
			td.MaybeScanArgs(t, "priority", &prio)
			n := len(sched.calls)
			res, err := f.Submit(SubmitRequest{Client: client, Pipeline: pipeline, Priority: int32(prio), Graph: mustParse(t, td.Input), From: from, To: to})
			if err != nil {
				return "error: " + err.Error()
			}
			return fmt.Sprintf("components %d, tasks %d\n", res.Components, res.TasksEnqueued) + tasks(n)
		case "complete":
			keys, err := f.Cache().ComponentKeys()
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, k := range keys {
				memos, err := f.Cache().Memos(k)
				if err != nil {
					t.Fatal(err)
				}
				for ref, e := range memos {
					if e.State == MemoPending {
						if err := f.MarkReady(k, ref, e.Gen, 100, 1000); err != nil {
							t.Fatal(err)
						}
						n++
					}
				}
			}
			return fmt.Sprintf("%d entries ready", n)
		case "change":
			var id string
			td.ScanArgs(t, "block", &id)
			b := vb.newest(id)
			b.ColumnVersions = maps.Clone(b.ColumnVersions)
			if b.ColumnVersions == nil {
				b.ColumnVersions = map[string]int64{}
			}
			b.Ref = blockref.New(id, b.Ref.Version()+1)
			b.RawObject = fmt.Sprintf("raw/ads/%s.arrow", b.Ref)
			var cols []string
			if td.HasArg("rows") {
				for _, fd := range schema.Fields {
					cols = append(cols, fd.Name)
				}
			} else {
				td.ScanArgs(t, "columns", &cols)
			}
			for _, c := range cols {
				b.ColumnVersions[c] = b.Ref.Version()
			}
			vb.add(b)
			n := len(sched.calls)
			inv, err := f.BlockChanged("ads", b)
			if err != nil {
				return "error: " + err.Error()
			}
			s, _ := vb.Snapshot()
			return fmt.Sprintf("%s version %d at snapshot %d: candidates %d, tasks %d, enqueued %d\n",
				id, b.Ref.Version(), s, inv.Candidates, len(inv.Tasks), inv.Enqueued) + tasks(n)
		case "solve":
			var client, pipeline string
			var snap int64
			td.ScanArgs(t, "client", &client)
			td.ScanArgs(t, "pipeline", &pipeline)
			td.MaybeScanArgs(t, "snapshot", &snap)
			n := len(sched.calls)
			sol, err := f.ReadSolutionAt(client, pipeline, 0, 0, snap)
			if err != nil {
				return "error: " + err.Error()
			}
			var b strings.Builder
			fmt.Fprintf(&b, "snapshot %d: ready %d, pending %d\n", sol.Snapshot, sol.Ready, sol.Pending)
			for _, r := range sol.Raw {
				fmt.Fprintf(&b, "raw %s v%d %s\n", r.Ref.ID(), r.Ref.Version(), r.RawObject)
			}
			for _, in := range sol.SortedInputs() {
				fmt.Fprintf(&b, "%s:", in.Name)
				for _, bs := range in.Blocks {
					fmt.Fprintf(&b, " %s=%s", bs.Memo, bs.State)
				}
				b.WriteString("\n")
			}
			return b.String() + tasks(n)
		case "drop":
			var id string
			var keep []string
			td.ScanArgs(t, "block", &id)
			td.ScanArgs(t, "keep", &keep)
			var removed, live []Block
			for _, v := range vb.hist[id] {
				if slices.Contains(keep, fmt.Sprint(v.b.Ref.Version())) {
					live = append(live, v.b)
				} else {
					removed = append(removed, v.b)
				}
			}
			gone, err := f.DropVersions("ads", removed, live)
			if err != nil {
				return "error: " + err.Error()
			}
			var lines []string
			for _, e := range gone {
				rec, err := f.Cache().Component(e.Component)
				if err != nil {
					t.Fatal(err)
				}
				lines = append(lines, fmt.Sprintf("dropped %s %s: %s", e.Block, e.State, short(rec.DSL)))
			}
			slices.Sort(lines)
			return fmt.Sprintf("%d entries dropped\n", len(gone)) + strings.Join(lines, "\n")
		}
		td.Fatalf(t, "unknown command %q", td.Cmd)
		return ""
	})
}
