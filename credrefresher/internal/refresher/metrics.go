package refresher

import "github.com/prometheus/client_golang/prometheus"

// Metrics of the refresher. No label or value ever holds a credential.
type Metrics struct {
	// LastSuccess is the Unix time of the last successful refresh (aws) or check (static).
	LastSuccess prometheus.Gauge
	// Expiry is the Unix time the token in the Secret expires (aws).
	Expiry prometheus.Gauge
	// Failures counts failed refreshes or checks by reason.
	Failures *prometheus.CounterVec
	// OK is 1 while the last result was good, else 0.
	OK prometheus.Gauge
	// PublishFailures counts failed status publications.
	PublishFailures prometheus.Counter
}

// NewMetrics registers the metrics under namespace (the binary's Name).
func NewMetrics(reg prometheus.Registerer, namespace string) *Metrics {
	m := &Metrics{
		LastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "last_success_timestamp_seconds",
			Help: "Unix time of the last successful credential refresh (aws) or check (static).",
		}),
		Expiry: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "token_expiry_timestamp_seconds",
			Help: "Unix time the registry token in the repo-creds Secret expires (aws).",
		}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "failures_total",
			Help: "Failed credential refreshes or checks, by reason.",
		}, []string{"reason"}),
		OK: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "credentials_ok",
			Help: "1 while the last refresh or check succeeded, else 0.",
		}),
		PublishFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "status_publish_failures_total",
			Help: "Failed publications of the credentials status on NATS.",
		}),
	}
	reg.MustRegister(m.LastSuccess, m.Expiry, m.Failures, m.OK, m.PublishFailures)
	return m
}
