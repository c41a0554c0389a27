package refresher_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/aicr-run/aicr-operator/credrefresher/internal/refresher"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/servicetest"
)

// Named timeouts for state the tests wait for.
const (
	loopSettleTimeout = 10 * time.Second
	publishTimeout    = 10 * time.Second
)

var t0 = time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)

type reported struct {
	id     string
	status bus.CredentialsStatus
}

// recorder is a StatusReporter that keeps every report.
type recorder struct {
	mu  sync.Mutex
	all []reported
}

func (r *recorder) Report(id string, st bus.CredentialsStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, reported{id, st})
}

func (r *recorder) reports() []reported {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]reported(nil), r.all...)
}

// eventually is servicetest.Eventually.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	servicetest.Eventually(t, timeout, what, func() (bool, string) { return cond(), "" })
}

// settled waits until the loop is blocked on the fake clock again.
func settled(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	eventually(t, loopSettleTimeout, "the loop to wait on the clock", clk.HasWaiters)
}

// run starts loop and stops it when the test ends, failing if it returns an error.
func run(t *testing.T, loop interface{ Run(context.Context) error }) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v, want nil on cancel", err)
		}
	})
}

func newMetrics() (*refresher.Metrics, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	return refresher.NewMetrics(reg, "credrefresher"), reg
}
