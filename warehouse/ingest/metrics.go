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
)

var (
	descRecords = prometheus.NewDesc(MetricRecords,
		"Kafka records consumed, including dead-lettered ones and ones skipped as already stored.", []string{"source"}, nil)
	descRows = prometheus.NewDesc(MetricRows,
		"Events ingested: rows written into sealed and catalogued raw blocks.", []string{"source"}, nil)
	descBlocks = prometheus.NewDesc(MetricBlocks,
		"Raw blocks sealed and catalogued.", []string{"source"}, nil)
	descLateBlocks = prometheus.NewDesc(MetricLateBlocks,
		"Sealed raw blocks flagged late: new versions of windows that were already closed.", []string{"source"}, nil)
	descLateRows = prometheus.NewDesc(MetricLateRows,
		"Events in late blocks: they arrived after their window was closed.", []string{"source"}, nil)
	descDeadLetters = prometheus.NewDesc(MetricDeadLetters,
		"Records sent to the dead-letter topic, by reason code (the sig-dlq-reason-code header).", []string{"source", "reason"}, nil)
	descSkipped = prometheus.NewDesc(MetricSkipped,
		"Records consumed again after a restart and skipped because a catalogued block holds them.", []string{"source"}, nil)
	descCommits = prometheus.NewDesc(MetricCommits,
		"Kafka offset commits of the ingestion consumer group.", []string{"source"}, nil)
	descOffsetResets = prometheus.NewDesc(MetricOffsetResets,
		"Partitions whose committed offset the log did not have when assigned (past_end: past the log's end; before_start: records deleted before they were ingested); ingestion resumed at the log start.",
		[]string{"source", "reason"}, nil)
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
		descDeadLetters, descSkipped, descCommits, descOffsetResets} {
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
	}
}
