package refresher_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/aicr-run/aicr-operator/credrefresher/internal/ecr/ecrtest"
	"github.com/aicr-run/aicr-operator/credrefresher/internal/refresher"
	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	"github.com/aicr-run/aicr-operator/servicekit/logging"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/natstest"
)

// TestTheTokenNeverLeaves runs a refresh and a failed refresh whose error body echoes the
// token (and one never seen), captures every log line at trace level, every message published
// on NATS and the metrics page, and looks for the secrets in every form.
func TestTheTokenNeverLeaves(t *testing.T) {
	written, unseen := ecrtest.Password("written"), ecrtest.Password("unseen")
	f := newAWS(t, func(n int, now time.Time) ecrtest.Reply {
		if n == 1 {
			return ecrtest.Reply{Token: ecrtest.Token("AWS", written), ExpiresAt: now.Add(12 * time.Hour)}
		}
		return ecrtest.Reply{Status: http.StatusBadRequest, Code: "InvalidParameterException", Message: fmt.Sprintf(
			"token %s (password %s) is not %s", ecrtest.Token("AWS", written), written, ecrtest.Token("AWS", unseen))}
	})
	metrics, reg := newMetrics()
	f.loop.Metrics = metrics

	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	reporter := &refresher.Reporter{
		Publisher:   bus.NewPublisher(js, "credrefresher"),
		StreamReady: func(ctx context.Context) error { return dispatch.EnsureStreams(ctx, js, 1) },
		Clock:       f.clk, Metrics: metrics,
	}
	f.loop.Reporter = reporter

	var logs bytes.Buffer
	log := zerolog.New(zerolog.SyncWriter(&logs)).Level(zerolog.TraceLevel)
	ctx, cancel := context.WithCancel(logging.Into(context.Background(), log))
	done := make(chan struct{}, 2)
	go func() { _ = reporter.Run(ctx); done <- struct{}{} }()
	go func() { _ = f.loop.Run(ctx); done <- struct{}{} }()

	eventually(t, loopSettleTimeout, "the refresh", func() bool { return f.srv.Calls() == 1 })
	eventually(t, publishTimeout, "the refresh published", func() bool { return streamMessages(t, js) == 1 })
	f.clk.Step(6 * time.Hour)
	eventually(t, loopSettleTimeout, "the failed refresh", func() bool { return f.srv.Calls() == 2 })
	eventually(t, publishTimeout, "the failure published", func() bool { return streamMessages(t, js) == 2 })
	cancel()
	<-done
	<-done

	if f.password(t) != written {
		t.Fatalf("the Secret does not hold the written token: the test would prove nothing")
	}
	published := readStream(t, js)
	page := metricsPage(t, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	for what, text := range map[string]string{"logs": logs.String(), "published messages": published, "metrics": page} {
		for form, secret := range map[string]string{
			"password": written, "authorization token": ecrtest.Token("AWS", written),
			"unseen password": unseen, "unseen token": ecrtest.Token("AWS", unseen),
			"password's first 40 characters": written[:40],
			"token's first 40 characters":    ecrtest.Token("AWS", written)[:40],
			"decoded password's payload":     "secret-written",
		} {
			if strings.Contains(text, secret) {
				t.Errorf("%s show the %s", what, form)
			}
		}
	}
	for _, want := range []string{"refreshed registry credentials", "refresh registry credentials failed", "InvalidParameterException"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q: the capture missed the refresh\n%s", want, logs.String())
		}
	}
	if !strings.Contains(published, "InvalidParameterException") || !strings.Contains(page, "credrefresher_failures_total") {
		t.Errorf("published messages or metrics lack the failure:\n%s\n%s", published, page)
	}
}

func streamMessages(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), bus.StreamEvents)
	if err != nil {
		return 0
	}
	info, err := s.Info(context.Background())
	if err != nil {
		return 0
	}
	return info.State.Msgs
}

// readStream returns every stored message on the credentials subject, raw, and their headers.
func readStream(t *testing.T, js jetstream.JetStream) string {
	t.Helper()
	s, err := js.Stream(context.Background(), bus.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for seq := uint64(1); seq <= streamMessages(t, js); seq++ {
		m, err := s.GetMsg(context.Background(), seq)
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject != bus.SubjectCredentials {
			t.Errorf("message %d on %s, want %s", seq, m.Subject, bus.SubjectCredentials)
		}
		fmt.Fprintf(&out, "%v %s\n", m.Header, m.Data)
		// a consumer might decode base64 fields; there are none, but look anyway
		if dec, err := base64.StdEncoding.DecodeString(string(m.Data)); err == nil {
			out.Write(dec)
		}
	}
	return out.String()
}

func metricsPage(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}
