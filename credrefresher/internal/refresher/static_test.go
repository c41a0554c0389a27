package refresher_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/aicr-run/aicr-operator/credrefresher/internal/refresher"
	"github.com/aicr-run/aicr-operator/credrefresher/internal/secret"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

func TestStaticReportsWhatIsMissingAndNeverWrites(t *testing.T) {
	const password = "static-admin-password"
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace},
		Data: map[string][]byte{"type": []byte("oci"), "url": []byte("oci://registry.example.com/aicr"),
			"username": []byte("robot"), "password": []byte(password)},
	}
	cs := k8sfake.NewClientset(s)
	clk := clocktesting.NewFakeClock(t0)
	rec := &recorder{}
	metrics, _ := newMetrics()
	run(t, &refresher.Static{Checker: &secret.Store{Secrets: cs.CoreV1(), Ref: ref}, Reporter: rec, Clock: clk,
		Metrics: metrics, Secret: ref, WantURL: "oci://registry.example.com/aicr", Interval: time.Minute})

	eventually(t, loopSettleTimeout, "the first check", func() bool { return len(rec.reports()) == 1 })
	settled(t, clk)
	first := rec.reports()[0].status
	if first.OK || first.Reason != v1alpha1.ReasonRegistryCredentialsUnavailable || first.Mode != refresher.ModeStatic ||
		!strings.Contains(first.Message, "label argocd.argoproj.io/secret-type is missing (want repo-creds)") {
		t.Errorf("first report = %+v, want Unavailable naming the missing label", first)
	}

	// unchanged: the same message ID, so the reporter drops it
	clk.Step(time.Minute)
	eventually(t, loopSettleTimeout, "the second check", func() bool { return len(rec.reports()) == 2 })
	settled(t, clk)
	if a, b := rec.reports()[0].id, rec.reports()[1].id; a != b {
		t.Errorf("an unchanged result has a new ID %s (was %s)", b, a)
	}

	// the admin adds the label
	s.Labels = map[string]string{"argocd.argoproj.io/secret-type": "repo-creds"}
	if _, err := cs.CoreV1().Secrets(ref.Namespace).Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cs.ClearActions()
	clk.Step(time.Minute)
	eventually(t, loopSettleTimeout, "the third check", func() bool { return len(rec.reports()) == 3 })
	settled(t, clk)
	third := rec.reports()[2]
	if !third.status.OK || third.status.Reason != "" || third.id == rec.reports()[1].id {
		t.Errorf("after the fix: %+v, want OK under a new ID", third)
	}
	if got := testutil.ToFloat64(metrics.OK); got != 1 {
		t.Errorf("ok metric = %v, want 1", got)
	}
	for _, a := range cs.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("static mode did %s %s, want only get", a.GetVerb(), a.GetResource().Resource)
		}
	}
	for _, r := range rec.reports() {
		if strings.Contains(r.status.Message, password) {
			t.Errorf("a report shows the password")
		}
	}
}

// A registry that needs no credentials: the Secret the specification's snippet creates, with an
// empty username and password, is usable; the report says Argo CD pulls anonymously.
func TestStaticAcceptsAnAnonymousRegistry(t *testing.T) {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace, Labels: map[string]string{"argocd.argoproj.io/secret-type": "repo-creds"}},
		Data: map[string][]byte{"type": []byte("oci"), "url": []byte("oci://registry.example.com/aicr"),
			"username": {}, "password": {}},
	}
	rec := &recorder{}
	metrics, _ := newMetrics()
	clk := clocktesting.NewFakeClock(t0)
	run(t, &refresher.Static{Checker: &secret.Store{Secrets: k8sfake.NewClientset(s).CoreV1(), Ref: ref}, Reporter: rec, Clock: clk,
		Metrics: metrics, Secret: ref, WantURL: "oci://registry.example.com/aicr", Interval: time.Minute})
	eventually(t, loopSettleTimeout, "the first check", func() bool { return len(rec.reports()) == 1 })
	got := rec.reports()[0].status
	if !got.OK || got.Reason != "" || !strings.Contains(got.Message, "no username or password: Argo CD pulls anonymously") {
		t.Errorf("report = %+v, want OK for anonymous pulls", got)
	}
}

// A result that comes back is a new message: OK, a transient API error (an API server just
// restarted refuses before its authorizer is ready), OK again, and OK from the next leader after
// that; JetStream would drop a repeated ID as a duplicate and the planner keep the error.
func TestStaticReportsARecoveryUnderANewID(t *testing.T) {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace, Labels: map[string]string{"argocd.argoproj.io/secret-type": "repo-creds"}},
		Data: map[string][]byte{"type": []byte("oci"), "url": []byte("oci://registry.example.com/aicr"),
			"username": []byte("robot"), "password": []byte("p")},
	}
	cs := k8sfake.NewClientset(s)
	var refuse atomic.Bool
	cs.PrependReactor("get", "secrets", func(clienttesting.Action) (bool, runtime.Object, error) {
		if refuse.Load() {
			return true, nil, apierrors.NewForbidden(corev1.Resource("secrets"), ref.Name, errors.New("RBAC: not ready"))
		}
		return false, nil, nil
	})
	clk := clocktesting.NewFakeClock(t0)
	rec := &recorder{}
	metrics, _ := newMetrics()
	loop := func() *refresher.Static {
		return &refresher.Static{Checker: &secret.Store{Secrets: cs.CoreV1(), Ref: ref}, Reporter: rec, Clock: clk,
			Metrics: metrics, Secret: ref, WantURL: "oci://registry.example.com/aicr", Interval: time.Minute}
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop().Run(ctx) }()
	check := func(n int) reported {
		t.Helper()
		eventually(t, loopSettleTimeout, fmt.Sprintf("check %d", n), func() bool { return len(rec.reports()) == n })
		settled(t, clk)
		return rec.reports()[n-1]
	}
	ok := check(1)
	refuse.Store(true)
	clk.Step(time.Minute)
	failed := check(2)
	refuse.Store(false)
	clk.Step(time.Minute)
	again := check(3)
	if !ok.status.OK || failed.status.OK || !again.status.OK {
		t.Fatalf("reports %+v, %+v, %+v; want OK, not OK, OK", ok.status, failed.status, again.status)
	}
	if again.id == ok.id || again.id == failed.id {
		t.Errorf("OK again has the ID %s of an earlier report (%s, %s)", again.id, ok.id, failed.id)
	}

	// The next leader: the last report was the error, so its OK must go out too.
	refuse.Store(true)
	clk.Step(time.Minute)
	lastWords := check(4)
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	refuse.Store(false)
	clk.Step(time.Second)
	run(t, loop())
	next := check(5)
	for _, r := range rec.reports()[:4] {
		if next.id == r.id {
			t.Errorf("the next leader's OK has the ID %s of an earlier report (last: %+v)", next.id, lastWords.status)
		}
	}
}
