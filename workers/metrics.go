package workers

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// RegisterQueueMetrics exports the queue's depths and counters on r:
//
//	sig_queue_tasks{client,priority,state="queued"|"leased"}
//	sig_quarantined_tasks
//	sig_tasks_completed_total, sig_task_failures_total,
//	sig_lease_expirations_total, sig_tasks_quarantined_total
//	sig_task_seconds (moving average of task cost)
//	sig_banned_worker_builds (builds refused leases; BanBuild)
//
// Counters count since the queue was opened.
func RegisterQueueMetrics(r prometheus.Registerer, q *Queue) error {
	return r.Register(queueCollector{q})
}

var (
	descQueueTasks = prometheus.NewDesc("sig_queue_tasks",
		"Tasks in a client's queue at a priority, waiting (queued) or running (leased). A task wanted by several clients waits in each of their queues.",
		[]string{"client", "priority", "state"}, nil)
	descQuarantined = prometheus.NewDesc("sig_quarantined_tasks",
		"Tasks quarantined after failing repeatedly, awaiting an operator.", nil, nil)
	descCompleted = prometheus.NewDesc("sig_tasks_completed_total",
		"Memoization tasks completed.", nil, nil)
	descFailures = prometheus.NewDesc("sig_task_failures_total",
		"Failed task runs, expired leases included.", nil, nil)
	descExpired = prometheus.NewDesc("sig_lease_expirations_total",
		"Leases that expired without a heartbeat.", nil, nil)
	descQuarantines = prometheus.NewDesc("sig_tasks_quarantined_total",
		"Tasks that entered quarantine.", nil, nil)
	descTaskSeconds = prometheus.NewDesc("sig_task_seconds",
		"Moving average of lease-to-completion time of successful tasks.", nil, nil)
	descBannedBuilds = prometheus.NewDesc("sig_banned_worker_builds",
		"Worker builds refused leases because sigd confirmed wrong values in a memo object they computed; an operator lifts a ban.", nil, nil)
)

type queueCollector struct{ q *Queue }

func (c queueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQueueTasks, descQuarantined, descCompleted, descFailures, descExpired, descQuarantines, descTaskSeconds, descBannedBuilds} {
		ch <- d
	}
}

func (c queueCollector) Collect(ch chan<- prometheus.Metric) {
	for _, d := range c.q.Depths() {
		p := strconv.Itoa(int(d.Priority))
		ch <- prometheus.MustNewConstMetric(descQueueTasks, prometheus.GaugeValue, float64(d.Queued), d.Client, p, "queued")
		ch <- prometheus.MustNewConstMetric(descQueueTasks, prometheus.GaugeValue, float64(d.Leased), d.Client, p, "leased")
	}
	s := c.q.Stats()
	ch <- prometheus.MustNewConstMetric(descQuarantined, prometheus.GaugeValue, float64(s.Quarantined))
	ch <- prometheus.MustNewConstMetric(descCompleted, prometheus.CounterValue, float64(s.Completed))
	ch <- prometheus.MustNewConstMetric(descFailures, prometheus.CounterValue, float64(s.Failures))
	ch <- prometheus.MustNewConstMetric(descExpired, prometheus.CounterValue, float64(s.Expired))
	ch <- prometheus.MustNewConstMetric(descQuarantines, prometheus.CounterValue, float64(s.Quarantines))
	ch <- prometheus.MustNewConstMetric(descTaskSeconds, prometheus.GaugeValue, s.MeanTaskSeconds)
	ch <- prometheus.MustNewConstMetric(descBannedBuilds, prometheus.GaugeValue, float64(len(c.q.Bans())))
}
