package goodput

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metric names. All are gauges: chip-seconds are not counters because
// uncommitted work later becomes productive or lost, moving chip-time between
// categories.
const (
	// MetricRatio is SG, RG, PG or MPG (label kind) of a scope.
	MetricRatio = "sig_trainer_goodput_ratio"
	// MetricChipSeconds is the chip-seconds of a scope in one category.
	MetricChipSeconds = "sig_trainer_goodput_chip_seconds"
	// MetricCapacity is the fleet's capacity chip-seconds, the fleet SG
	// denominator.
	MetricCapacity = "sig_trainer_goodput_capacity_chip_seconds"
)

// Label values of MetricRatio's kind label.
const (
	KindScheduling = "scheduling"
	KindRuntime    = "runtime"
	KindProgram    = "program"
	KindMPG        = "mpg"
)

// The job label is training_job, not job: Prometheus sets job on every
// scraped series itself and would rename ours to exported_job.
var (
	ratioDesc = prometheus.NewDesc(MetricRatio,
		`ML Productivity Goodput and its factors (MPG paper §4). training_job="*" is the fleet, phase="*" all phases.`,
		[]string{"training_job", "phase", "kind"}, nil)
	chipSecondsDesc = prometheus.NewDesc(MetricChipSeconds,
		`Chip-seconds by category; training_job="*" and phase="*" are aggregates, exclude them when summing.`,
		[]string{"training_job", "phase", "category"}, nil)
	capacityDesc = prometheus.NewDesc(MetricCapacity,
		"Fleet capacity chip-seconds, the denominator of the fleet's scheduling goodput.",
		nil, nil)
)

// RegisterMetrics registers on reg a collector that, on every scrape, calls
// snapshot and exports the report. For a running trainer, snapshot is
// typically func() (Report, error) { return rec.Report(clk.Now()) }; at exit,
// a function returning the final report. A snapshot error fails the scrape.
func RegisterMetrics(reg prometheus.Registerer, snapshot func() (Report, error)) error {
	return reg.Register(collector{snapshot})
}

type collector struct{ snapshot func() (Report, error) }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- ratioDesc
	ch <- chipSecondsDesc
	ch <- capacityDesc
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	r, err := c.snapshot()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(ratioDesc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(capacityDesc, prometheus.GaugeValue, r.Fleet.CapacityChipSeconds)
	for _, x := range r.rows() {
		for _, k := range []struct {
			kind string
			v    float64
		}{{KindScheduling, x.s.SG}, {KindRuntime, x.s.RG}, {KindProgram, x.s.PG}, {KindMPG, x.s.MPG}} {
			ch <- prometheus.MustNewConstMetric(ratioDesc, prometheus.GaugeValue, k.v, x.job, x.phase, k.kind)
		}
		for cat, v := range x.s.ChipSeconds {
			ch <- prometheus.MustNewConstMetric(chipSecondsDesc, prometheus.GaugeValue, v, x.job, x.phase, Category(cat).String())
		}
	}
}
