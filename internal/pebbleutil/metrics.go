package pebbleutil

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// Store names one Pebble store of a process for its metrics: the store
// label and where its figures come from (its DB's Metrics).
type Store struct {
	Name    string
	Metrics func() *pebble.Metrics
}

var (
	descCacheHits   = prometheus.NewDesc("sig_pebble_block_cache_hits_total", "Block cache hits of the Pebble store.", []string{"store"}, nil)
	descCacheMisses = prometheus.NewDesc("sig_pebble_block_cache_misses_total", "Block cache misses of the Pebble store (reads from its files: the page cache or the disk).", []string{"store"}, nil)
	descCacheBytes  = prometheus.NewDesc("sig_pebble_block_cache_bytes", "Bytes held by the Pebble store's block cache.", []string{"store"}, nil)
	descCompactions = prometheus.NewDesc("sig_pebble_compactions_total", "Compactions of the Pebble store since it was opened.", []string{"store"}, nil)
	descDebt        = prometheus.NewDesc("sig_pebble_compaction_debt_bytes", "Bytes the Pebble store estimates it must compact to reach a stable shape.", []string{"store"}, nil)
	descFlushes     = prometheus.NewDesc("sig_pebble_flushes_total", "Memtable flushes of the Pebble store since it was opened.", []string{"store"}, nil)
	descMemtable    = prometheus.NewDesc("sig_pebble_memtable_bytes", "Bytes allocated by the Pebble store's memtables.", []string{"store"}, nil)
	descReadAmp     = prometheus.NewDesc("sig_pebble_read_amplification", "Sublevels and levels a read of the Pebble store may look in.", []string{"store"}, nil)
	descTableBytes  = prometheus.NewDesc("sig_pebble_table_bytes", "Bytes of the Pebble store's live sstables.", []string{"store"}, nil)
	descDiskBytes   = prometheus.NewDesc("sig_pebble_disk_bytes", "Bytes the Pebble store uses on disk (sstables, WAL, manifests, obsolete files).", []string{"store"}, nil)
)

// Collector exports each store's Pebble figures (block cache, compactions,
// memtables, read amplification, size) as sig_pebble_* metrics labelled
// store: what an operator looks at when a store's latency grows with its
// size.
func Collector(stores ...Store) prometheus.Collector { return collector(stores) }

type collector []Store

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCacheHits, descCacheMisses, descCacheBytes, descCompactions, descDebt,
		descFlushes, descMemtable, descReadAmp, descTableBytes, descDiskBytes} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c {
		m := s.Metrics()
		counter := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, s.Name)
		}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, s.Name)
		}
		counter(descCacheHits, float64(m.BlockCache.Hits))
		counter(descCacheMisses, float64(m.BlockCache.Misses))
		gauge(descCacheBytes, float64(m.BlockCache.Size))
		counter(descCompactions, float64(m.Compact.Count))
		gauge(descDebt, float64(m.Compact.EstimatedDebt))
		counter(descFlushes, float64(m.Flush.Count))
		gauge(descMemtable, float64(m.MemTable.Size))
		gauge(descReadAmp, float64(m.ReadAmp()))
		gauge(descTableBytes, float64(m.Total().TablesSize))
		gauge(descDiskBytes, float64(m.DiskSpaceUsage()))
	}
}
