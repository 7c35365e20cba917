package compact_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/sigdata/sig/warehouse/block"
	"github.com/sigdata/sig/warehouse/blockref"
	"github.com/sigdata/sig/warehouse/compact"
)

// TestPlan runs testdata/plan.txt: "plan target=N" over one block a line,
// "<first>-<last> <bytes>" with optional flags "compacted" (a compacted
// block), "schema=X" (another schema), "nokafka" (a block another program
// wrote); the output is the runs, one a line, by their parts' ranges.
func TestPlan(t *testing.T) {
	datadriven.RunTest(t, "testdata/plan.txt", func(t *testing.T, td *datadriven.TestData) string {
		var target int64
		td.ScanArgs(t, "target", &target)
		var blocks []block.Meta
		for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
			if line = strings.TrimSpace(line); line == "" {
				continue
			}
			f := strings.Fields(line)
			first, last, _ := strings.Cut(f[0], "-")
			lo, _ := strconv.ParseInt(first, 10, 64)
			hi, _ := strconv.ParseInt(last, 10, 64)
			size, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			kr := block.KafkaRange{Topic: "raw.ads", First: lo, Last: hi}
			id := block.ID(0, kr)
			m := block.Meta{ID: id, Key: block.RawKey("ads", blockref.New(id, 1)), Source: "ads", Kafka: &kr,
				Size: size, Rows: hi - lo + 1, SchemaFingerprint: "fp"}
			for _, flag := range f[2:] {
				switch {
				case flag == "compacted":
					m.Parts = []block.Part{{ID: "x"}, {ID: "y"}}
				case strings.HasPrefix(flag, "schema="):
					m.SchemaFingerprint = strings.TrimPrefix(flag, "schema=")
				case flag == "nokafka":
					m.Kafka = nil
				default:
					t.Fatalf("unknown flag %q", flag)
				}
			}
			blocks = append(blocks, m)
		}
		var b strings.Builder
		for _, run := range compact.Plan(blocks, target) {
			var size int64
			var names []string
			for _, m := range run {
				names = append(names, fmt.Sprintf("%d-%d", m.Kafka.First, m.Kafka.Last))
				size += m.Size
			}
			fmt.Fprintf(&b, "%s (%d bytes)\n", strings.Join(names, " "), size)
		}
		if b.Len() == 0 {
			return "no compaction\n"
		}
		return b.String()
	})
}
