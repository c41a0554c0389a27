package refresher_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/aicr-run/aicr-operator/credrefresher/internal/ecr"
	"github.com/aicr-run/aicr-operator/credrefresher/internal/ecr/ecrtest"
	"github.com/aicr-run/aicr-operator/credrefresher/internal/redact"
	"github.com/aicr-run/aicr-operator/credrefresher/internal/refresher"
	"github.com/aicr-run/aicr-operator/credrefresher/internal/secret"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

var ref = secret.Ref{Namespace: "argocd", Name: "aicr-registry"}

// awsFixture wires an AWS loop to a fake ECR server, a fake clientset and a recorder.
type awsFixture struct {
	clk     *clocktesting.FakeClock
	srv     *ecrtest.Server
	cs      *k8sfake.Clientset
	rec     *recorder
	metrics *refresher.Metrics
	loop    *refresher.AWS
}

func newAWS(t *testing.T, reply func(n int, now time.Time) ecrtest.Reply) *awsFixture {
	t.Helper()
	ecrtest.Isolate(t)
	f := &awsFixture{clk: clocktesting.NewFakeClock(t0), cs: k8sfake.NewClientset(), rec: &recorder{}}
	f.srv = ecrtest.New(t, func(n int) ecrtest.Reply { return reply(n, f.clk.Now()) })
	r := &redact.Redactor{}
	client, err := ecr.New(context.Background(), ecr.Config{Region: "us-west-2", Endpoint: f.srv.URL, Redactor: r})
	if err != nil {
		t.Fatal(err)
	}
	f.metrics, _ = newMetrics()
	f.loop = &refresher.AWS{
		Source: client, Writer: &secret.Store{Secrets: f.cs.CoreV1(), Ref: ref}, Reporter: f.rec, Clock: f.clk,
		Metrics: f.metrics, Redactor: r, Secret: ref, URL: "oci://123456789012.dkr.ecr.us-west-2.amazonaws.com/aicr",
		Interval: 6 * time.Hour, BackoffMin: 5 * time.Second, BackoffMax: 15 * time.Second,
	}
	return f
}

func (f *awsFixture) password(t *testing.T) string {
	t.Helper()
	s, err := f.cs.CoreV1().Secrets(ref.Namespace).Get(context.Background(), ref.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get Secret: %v", err)
	}
	return string(s.Data["password"])
}

// stepTo moves the clock d forward in two parts and proves the loop made no call before d
// (its timer had not fired: it still waits on the clock) and made call n at d.
func (f *awsFixture) stepTo(t *testing.T, d time.Duration, n int) {
	t.Helper()
	f.clk.Step(d - time.Millisecond)
	if !f.clk.HasWaiters() || f.srv.Calls() != n-1 {
		t.Fatalf("the loop woke %s early: %d calls, want %d", time.Millisecond, f.srv.Calls(), n-1)
	}
	f.clk.Step(time.Millisecond)
	eventually(t, loopSettleTimeout, fmt.Sprintf("ECR call %d", n), func() bool { return f.srv.Calls() == n })
	settled(t, f.clk)
}

func newStatus(ok bool, reason string, refreshed, expires time.Time, message string) bus.CredentialsStatus {
	return bus.CredentialsStatus{Mode: refresher.ModeAWS, OK: ok, Reason: reason, RefreshedAt: &refreshed, ExpiresAt: &expires, Message: message}
}

func okReply(n int, now time.Time) ecrtest.Reply {
	return ecrtest.Reply{Token: ecrtest.Token("AWS", fmt.Sprintf("password-%d", n)), ExpiresAt: now.Add(12 * time.Hour)}
}

func TestAWSRefreshesAtStartAndEverySixHours(t *testing.T) {
	f := newAWS(t, okReply)
	run(t, f.loop)

	eventually(t, loopSettleTimeout, "the first refresh", func() bool { return f.srv.Calls() == 1 })
	settled(t, f.clk)
	if got := f.password(t); got != "password-1" {
		t.Errorf("password after start is the %q token", got)
	}
	for n := 2; n <= 3; n++ {
		f.stepTo(t, 6*time.Hour, n)
		if got, want := f.password(t), fmt.Sprintf("password-%d", n); got != want {
			t.Errorf("password after refresh %d: got another token, want %s", n, want)
		}
	}

	now := t0.Add(12 * time.Hour)
	want := []reported{}
	for _, at := range []time.Time{t0, t0.Add(6 * time.Hour), now} {
		exp := at.Add(12 * time.Hour)
		want = append(want, reported{
			id:     fmt.Sprintf("aws/refreshed/%d", exp.Unix()),
			status: newStatus(true, "", at, exp, fmt.Sprintf("token written to Secret argocd/aicr-registry, expires at %s", exp.Format(time.RFC3339))),
		})
	}
	if diff := cmp.Diff(want, f.rec.reports(), cmp.AllowUnexported(reported{})); diff != "" {
		t.Errorf("reports (-want +got):\n%s", diff)
	}
	if got := testutil.ToFloat64(f.metrics.LastSuccess); got != float64(now.Unix()) {
		t.Errorf("last success metric = %v, want %d", got, now.Unix())
	}
	if got := testutil.ToFloat64(f.metrics.Expiry); got != float64(now.Add(12*time.Hour).Unix()) {
		t.Errorf("expiry metric = %v, want %d", got, now.Add(12*time.Hour).Unix())
	}
	for _, r := range f.srv.Requests() {
		if r.Service != "ecr" || r.Region != "us-west-2" || len(r.Problems) > 0 {
			t.Errorf("request %+v, want a clean SigV4 request for ecr in us-west-2", r)
		}
	}
}

func TestAWSRefreshesEarlierWhenTheTokenIsShortLived(t *testing.T) {
	f := newAWS(t, func(n int, now time.Time) ecrtest.Reply {
		return ecrtest.Reply{Token: ecrtest.Token("AWS", "pw"), ExpiresAt: now.Add(2 * time.Hour)}
	})
	run(t, f.loop)
	eventually(t, loopSettleTimeout, "the first refresh", func() bool { return f.srv.Calls() == 1 })
	settled(t, f.clk)
	// half of the token's two hours, not six hours
	f.stepTo(t, time.Hour, 2)
}

func TestAWSRetriesAFailingEndpointWithCappedBackoff(t *testing.T) {
	f := newAWS(t, func(n int, now time.Time) ecrtest.Reply {
		if n <= 4 {
			return ecrtest.Reply{Status: http.StatusServiceUnavailable, Code: "ServiceUnavailableException", Message: "ECR is down"}
		}
		return okReply(n, now)
	})
	run(t, f.loop)
	eventually(t, loopSettleTimeout, "the first attempt", func() bool { return f.srv.Calls() == 1 })
	settled(t, f.clk)

	// 5s, 10s, then capped at 15s
	f.stepTo(t, 5*time.Second, 2)
	f.stepTo(t, 10*time.Second, 3)
	f.stepTo(t, 15*time.Second, 4)
	f.stepTo(t, 15*time.Second, 5)

	reps := f.rec.reports()
	if len(reps) != 5 {
		t.Fatalf("%d reports, want 4 failures and a refresh: %+v", len(reps), reps)
	}
	ids := map[string]bool{}
	for i, r := range reps[:4] {
		st := r.status
		if st.OK || st.Reason != v1alpha1.ReasonRegistryCredentialsUnavailable || st.ExpiresAt != nil {
			t.Errorf("report %d = %+v, want Unavailable without an expiry", i+1, st)
		}
		for _, want := range []string{"ServiceUnavailableException", "ECR is down", "no token has been written to Secret argocd/aicr-registry", fmt.Sprintf("attempt %d", i+1)} {
			if !strings.Contains(st.Message, want) {
				t.Errorf("report %d message %q lacks %q", i+1, st.Message, want)
			}
		}
		ids[r.id] = true
	}
	if len(ids) != 4 {
		t.Errorf("failure message IDs repeat: %v", ids)
	}
	if !reps[4].status.OK {
		t.Errorf("last report = %+v, want the refresh", reps[4].status)
	}
	if got := testutil.ToFloat64(f.metrics.Failures.WithLabelValues(v1alpha1.ReasonRegistryCredentialsUnavailable)); got != 4 {
		t.Errorf("failures metric = %v, want 4", got)
	}
	if got := f.password(t); got != "password-5" {
		t.Errorf("Secret not written after the endpoint recovered")
	}
}

func TestAWSReportsStaleOnceTheWrittenTokenExpires(t *testing.T) {
	f := newAWS(t, func(int, time.Time) ecrtest.Reply {
		return ecrtest.Reply{Status: http.StatusBadRequest, Code: "AccessDeniedException", Message: "not authorized"}
	})
	// a token from the previous run, valid 30 more seconds; backoff far longer
	f.loop.LastExpiry = t0.Add(30 * time.Second)
	f.loop.BackoffMin, f.loop.BackoffMax = time.Minute, time.Minute
	run(t, f.loop)
	eventually(t, loopSettleTimeout, "the first attempt", func() bool { return f.srv.Calls() == 1 })
	settled(t, f.clk)
	// the loop wakes when the token expires, not after the one-minute backoff
	f.stepTo(t, 30*time.Second, 2)

	reps := f.rec.reports()
	if len(reps) != 2 {
		t.Fatalf("%d reports, want 2", len(reps))
	}
	exp := t0.Add(30 * time.Second)
	for i, want := range []struct{ reason, text string }{
		{v1alpha1.ReasonRegistryCredentialsUnavailable, "is valid until 2026-05-01T00:00:30Z"},
		{v1alpha1.ReasonRegistryCredentialsStale, "expired at 2026-05-01T00:00:30Z"},
	} {
		st := reps[i].status
		if st.OK || st.Reason != want.reason || st.ExpiresAt == nil || !st.ExpiresAt.Equal(exp) || !strings.Contains(st.Message, want.text) {
			t.Errorf("report %d = %+v, want %s with expiry %s and %q", i+1, st, want.reason, exp, want.text)
		}
	}
	if got := testutil.ToFloat64(f.metrics.Failures.WithLabelValues(v1alpha1.ReasonRegistryCredentialsStale)); got != 1 {
		t.Errorf("stale failures metric = %v, want 1", got)
	}
}
