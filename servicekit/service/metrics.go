package service

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aicr-run/aicr-operator/servicekit/buildinfo"
	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
)

// MetricsPrefix starts the name of every metric of the operator's own.
const MetricsPrefix = "aicr_"

// readyTimeout bounds the readiness checks a scrape runs.
const readyTimeout = 3 * time.Second

// registerStateMetrics adds aicr_ready and aicr_leader, with the binary in label binary, and
// aicr_build_info.
func (b *Base) registerStateMetrics() {
	labels := prometheus.Labels{dispatch.LabelBinary: b.Name}
	build := buildinfo.Get()
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "build_info",
		ConstLabels: prometheus.Labels{dispatch.LabelBinary: b.Name, "version": build.Version,
			"revision": build.Revision, "goversion": build.GoVersion},
		Help: "Always 1; the labels say what the binary was built from (the version and git revision make stamps in).",
	})
	info.Set(1)
	b.Metrics.MustRegister(
		info,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ready", ConstLabels: labels,
			Help: "1 while /readyz passes (NATS and the API server reachable, the binary's own checks), else 0.",
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
			defer cancel()
			if b.Ready(ctx) != nil {
				return 0
			}
			return 1
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "leader", ConstLabels: labels,
			Help: "1 while this replica does the binary's work (it holds the Lease, or runs without leader election), else 0.",
		}, func() float64 { return float64(b.leading.Load()) }),
	)
}

// Publisher returns a bus publisher for the binary that counts what it publishes.
func (b *Base) Publisher() *dispatch.Publisher { return dispatch.NewPublisher(b.JS, b.Name, b.Bus) }
