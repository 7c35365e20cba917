package ingest

import "github.com/prometheus/client_golang/prometheus"

// Metric names (sigd exports them on /metrics), each labelled by source.
const (
	MetricRecords      = "sig_ingest_records_total"
	MetricRows         = "sig_ingest_rows_total"
	MetricBlocks       = "sig_ingest_blocks_total"
	MetricLateBlocks   = "sig_ingest_late_blocks_total"
	MetricLateRows     = "sig_ingest_late_rows_total"
	MetricDeadLetters  = "sig_ingest_dead_letters_total"
	MetricSkipped      = "sig_ingest_skipped_records_total"
	MetricCommits      = "sig_ingest_offset_commits_total"
	MetricOffsetResets = "sig_ingest_offset_resets_total"
	MetricVersions     = "sig_ingest_block_versions_total"
	MetricChangedRows  = "sig_ingest_changed_rows_total"
	MetricCollected    = "sig_ingest_versions_collected_total"
	// Compaction (issue 28): compacted blocks catalogued, and the small
	// blocks they replaced.
	MetricCompactions     = "sig_ingest_compactions_total"
	MetricCompactedBlocks = "sig_ingest_compacted_blocks_total"
)

// VersionKinds label MetricVersions: what made a block version (one
// version can count under several).
var VersionKinds = []string{"late", "update", "delete"}

var (
	descRecords = prometheus.NewDesc(MetricRecords,
		"Kafka records consumed, including dead-lettered ones and ones skipped as already stored.", []string{"source"}, nil)
	descRows = prometheus.NewDesc(MetricRows,
		"Events ingested: rows written into sealed and catalogued raw blocks, new ones or appended to a block's new version.", []string{"source"}, nil)
	descBlocks = prometheus.NewDesc(MetricBlocks,
		"Raw blocks sealed and catalogued.", []string{"source"}, nil)
	descLateBlocks = prometheus.NewDesc(MetricLateBlocks,
		"Sealed raw blocks flagged late: new blocks of windows that were already closed and had no block to append to.", []string{"source"}, nil)
	descLateRows = prometheus.NewDesc(MetricLateRows,
		"Late events: they arrived after their window was closed (in late blocks, or appended to a block's new version).", []string{"source"}, nil)
	descDeadLetters = prometheus.NewDesc(MetricDeadLetters,
		"Records sent to the dead-letter topic, by reason code (the sig-dlq-reason-code header).", []string{"source", "reason"}, nil)
	descSkipped = prometheus.NewDesc(MetricSkipped,
		"Records consumed again after a restart and skipped because a catalogued block holds them.", []string{"source"}, nil)
	descCommits = prometheus.NewDesc(MetricCommits,
		"Kafka offset commits of the ingestion consumer group.", []string{"source"}, nil)
	descOffsetResets = prometheus.NewDesc(MetricOffsetResets,
		"Partitions whose committed offset the log did not have when assigned (past_end: past the log's end; before_start: records deleted before they were ingested); ingestion resumed at the log start.",
		[]string{"source", "reason"}, nil)
	descVersions = prometheus.NewDesc(MetricVersions,
		"New versions (>= 2) of sealed raw blocks written and catalogued, by what made them: late (rows appended), update (columns overwritten), delete (rows removed).",
		[]string{"source", "kind"}, nil)
	descCollected = prometheus.NewDesc(MetricCollected,
		"Superseded raw block versions no catalog pin and not the present sees, removed from the catalog and their objects deleted.",
		[]string{"source"}, nil)
	descCompactions = prometheus.NewDesc(MetricCompactions,
		"Compacted blocks catalogued: the small blocks of a closed, quiet partition and window rewritten as one block, with its lineage.",
		[]string{"source"}, nil)
	descCompactedBlocks = prometheus.NewDesc(MetricCompactedBlocks,
		"Small blocks compacted into larger ones (ended by a tombstone version; their objects go once no pinned snapshot sees them).",
		[]string{"source"}, nil)
	descChangedRows = prometheus.NewDesc(MetricChangedRows,
		"Rows of sealed raw blocks changed by new versions, by kind: update (columns overwritten), delete (removed).",
		[]string{"source", "kind"}, nil)
)

// RegisterMetrics exports the counters of ins (Stats) on r, one series per
// source; dead letters by every reason of DeadLetterReasons, zeros included,
// so that a rate over them exists before the first one.
func RegisterMetrics(r prometheus.Registerer, ins ...*Ingester) error {
	return r.Register(collector(ins))
}

type collector []*Ingester

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRecords, descRows, descBlocks, descLateBlocks, descLateRows,
		descDeadLetters, descSkipped, descCommits, descOffsetResets, descVersions, descChangedRows, descCollected,
		descCompactions, descCompactedBlocks} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for _, in := range c {
		src := in.Source()
		st := in.Stats()
		counter(descRecords, st.Records, src)
		counter(descRows, st.Rows, src)
		counter(descBlocks, st.Blocks, src)
		counter(descLateBlocks, st.LateBlocks, src)
		counter(descLateRows, st.LateRows, src)
		for i, reason := range DeadLetterReasons {
			counter(descDeadLetters, st.DeadLettersByReason[i], src, reason)
		}
		counter(descSkipped, st.Skipped, src)
		counter(descCommits, st.Commits, src)
		counter(descOffsetResets, st.OffsetResets, src, "past_end")
		counter(descOffsetResets, st.OffsetsBehind, src, "before_start")
		for i, v := range []int64{st.VersionsLate, st.VersionsUpdate, st.VersionsDelete} {
			counter(descVersions, v, src, VersionKinds[i])
		}
		counter(descChangedRows, st.UpdatedRows, src, "update")
		counter(descChangedRows, st.DeletedRows, src, "delete")
		counter(descCollected, st.VersionsCollected, src)
		counter(descCompactions, st.Compactions, src)
		counter(descCompactedBlocks, st.CompactedBlocks, src)
	}
}
