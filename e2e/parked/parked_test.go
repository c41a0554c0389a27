//go:build e2e

package parked

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

const (
	namespace = "parked"
	// good is a release whose Application the API server accepts; poison one whose every write
	// it refuses until the test removes the policy.
	good   = "good-a"
	poison = "poison-b"
	// policy is the ValidatingAdmissionPolicy (and its binding) that refuses poison's writes as
	// Forbidden: an error the applier can only redeliver, as a webhook or RBAC refusing it would.
	policy        = "e2e-parked-refuse-poison"
	policyMessage = "e2e: this Application may not be written"
)

// Named timeouts: the parking takes parkAfter handlings with 0.25 s and 0.5 s of backoff between
// them, and the planner reads the parked stream every 5 s; the rest is headroom for a loaded
// 2-core machine.
const (
	parkTimeout    = 2 * time.Minute
	processTimeout = 2 * time.Minute
	backoffSlack   = 50 * time.Millisecond
)

// "A message that keeps failing: bounded redelivery with backoff, then it is parked, the runtime
// says so with the error, kubectl aicr shows it, and a person can retry it." The API server
// refuses every write of one release's Application (an admission policy, Forbidden). The
// applier's command for it is handled exactly --park-after times, each later than the one before
// by at least the backoff, then parked on AICR_PARKED with the error and taken off the queue:
// the other release's command is processed meanwhile, and no further attempt comes. The runtime
// turns MessagesParked=True naming the applier, the failures and the API server's error, and
// kubectl aicr parked prints it; neither carries a secret of the stack. Once the policy is gone,
// kubectl aicr parked --retry sends it back: the Application is written by its step, the parked
// stream is empty, MessagesParked=False, the annotation is removed and an Event says so.
func TestAMessageThatAlwaysFailsIsParkedShownAndRetried(t *testing.T) {
	s := stacktest.Need(t)
	ctx := t.Context()
	since := time.Now()
	unrefuse := refuse(t, s, poison)

	digests := map[string]string{good: stack.FakeDigest(good), poison: stack.FakeDigest(poison)}
	b, err := stack.BundleYAML("parked", "1.0.0", []stack.ExampleComponent{
		{Name: good, Dir: "charts", Namespace: namespace, Values: map[string]any{"v": 1}},
		{Name: poison, Dir: "charts", Namespace: namespace, Values: map[string]any{"v": 1}},
	}, digests)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ApplyBundle(ctx, b); err != nil {
		t.Fatal(err)
	}
	spec := stack.DefaultRuntimeSpec()
	spec.Rollout.Parallelism = 2 // both commands at once: the parked one must not hold the other
	if err := s.ApplyRuntime(ctx, spec); err != nil {
		t.Fatal(err)
	}

	// Parked: the runtime says so, with the applier, its failures and the API server's error.
	rt, err := s.WaitCondition(ctx, parkTimeout, v1alpha1.ConditionMessagesParked, metav1.ConditionTrue, v1alpha1.ReasonMessageParked)
	if err != nil {
		t.Fatal(err)
	}
	parkedSeen := time.Now()
	c := meta.FindStatusCondition(rt.Status.Conditions, v1alpha1.ConditionMessagesParked)
	for _, want := range []string{"1 message(s) parked", bus.ConsumerApplier + " gave up after " + fmt.Sprint(parkAfter) + " failures", policyMessage, "kubectl aicr parked --retry"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("MessagesParked message %q does not say %q", c.Message, want)
		}
	}

	// The parked stream holds that one command, as the observer reads it.
	js := stacktest.Observer(t, s, "parked-e2e")
	st, err := dispatch.ReadParked(ctx, js, 10)
	if err != nil {
		t.Fatal(err)
	}
	if st.Total != 1 || len(st.Oldest) != 1 {
		t.Fatalf("parked stream holds %d messages, want 1: %+v", st.Total, st.Oldest)
	}
	p := st.Oldest[0]
	if p.Consumer != bus.ConsumerApplier || p.Stream != bus.StreamCommands || p.Failures != parkAfter ||
		!strings.Contains(p.Error, policyMessage) || !bytes.Contains(p.Data, []byte(`"`+poison+`"`)) {
		t.Errorf("parked message: consumer %q, stream %q, %d failures, error %q, data %s; want the applier's command for %s on %s after %d failures with the policy's refusal",
			p.Consumer, p.Stream, p.Failures, p.Error, p.Data, poison, bus.StreamCommands, parkAfter)
	}

	// Bounded, with backoff: exactly parkAfter writes of the Application reached the API server,
	// each refused, each later than the one before by at least dispatch.Backoff; none since the
	// message was parked, though the condition came up to 5 s (the planner's poll) after it.
	attempts := writesOf(t, s, poison, since)
	if len(attempts) != parkAfter {
		t.Errorf("the API server saw %d writes of Application %s, want %d (--park-after): %v", len(attempts), poison, parkAfter, attempts)
	}
	for i, a := range attempts {
		if a.code != 403 {
			t.Errorf("write %d of %s answered %d, want 403 (the policy)", i+1, poison, a.code)
		}
		if i == 0 {
			continue
		}
		gap, want := a.at.Sub(attempts[i-1].at), dispatch.Backoff(uint64(i)) //nolint:gosec // G115: i counts attempts from 1
		if gap < want-backoffSlack {
			t.Errorf("write %d of %s came %s after write %d, want at least the backoff %s", i+1, poison, gap, i, want)
		}
	}
	if n := len(attempts); n > 0 {
		t.Logf("%d writes of %s refused, %s apart; parked and shown by %s", n, poison, gaps(attempts), parkedSeen.Sub(attempts[n-1].at).Round(time.Millisecond))
	}
	// The rest of the queue was not held behind it.
	waitAnnotations(t, s, good, "written by its step", func(a map[string]string) bool { return a[v1alpha1.AnnotationStep] != "" })

	// kubectl aicr shows it.
	out, err := s.KubectlAICR(ctx, "parked")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"MessagesParked=True", bus.ConsumerApplier + " gave up after", policyMessage} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl aicr parked printed %q, which does not say %q", out, want)
		}
	}
	// No secret of the stack in what a person reads.
	for name, secret := range secrets(t, s) {
		for what, text := range map[string]string{"the MessagesParked condition": c.Message, "kubectl aicr parked": out, "the parked message's error": p.Error} {
			if strings.Contains(text, secret) {
				t.Errorf("%s carries the secret %s", what, name)
			}
		}
	}

	// A person fixes the cause and sends it back: it is processed.
	unrefuse()
	if out, err := s.KubectlAICR(ctx, "parked", "--retry"); err != nil {
		t.Fatal(err)
	} else if !strings.Contains(out, v1alpha1.AnnotationRetryParked) {
		t.Errorf("kubectl aicr parked --retry printed %q", out)
	}
	ro, err := s.Rollout(ctx, rt.Status.Rollout)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ro.Status.Steps, func(st v1alpha1.Step) bool { return st.Release == poison })
	if i < 0 {
		t.Fatalf("rollout %s has no step of %s", ro.Name, poison)
	}
	step := v1alpha1.StepID(ro.Name, ro.Status.Steps[i].Index)
	waitAnnotations(t, s, poison, "written by "+step, func(a map[string]string) bool { return a[v1alpha1.AnnotationStep] == step })
	rt, err = s.WaitCondition(ctx, processTimeout, v1alpha1.ConditionMessagesParked, metav1.ConditionFalse, v1alpha1.ReasonNoMessagesParked)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := rt.Annotations[v1alpha1.AnnotationRetryParked]; ok {
		t.Errorf("the runtime still carries %s=%s once the parked stream is empty", v1alpha1.AnnotationRetryParked, v)
	}
	if st, err := dispatch.ReadParked(ctx, js, 10); err != nil || st.Total != 0 {
		t.Errorf("parked stream after the retry: %d messages (%v), want none", st.Total, err)
	}
	// The retry's writes (the create, and the handover of its fields to the operator's apply)
	// came after the refused ones, and each passed.
	all := writesOf(t, s, poison, since)
	if len(all) <= parkAfter {
		t.Errorf("the API server saw %d writes of Application %s in all, want more than the %d refused: the retry's", len(all), poison, parkAfter)
	}
	for i, a := range all[min(parkAfter, len(all)):] {
		if a.code < 200 || a.code > 299 {
			t.Errorf("write %d of %s, after the retry, answered %d", parkAfter+i+1, poison, a.code)
		}
	}
	events, err := s.Kube.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "reason=ParkedRetried"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
		return e.InvolvedObject.Name == v1alpha1.RuntimeName && strings.HasPrefix(e.Message, "1 parked message(s) sent back")
	}) {
		t.Errorf("no ParkedRetried Event on the runtime saying 1 message was sent back: %d Events of that reason", len(events.Items))
	}
}

// refuse makes the API server refuse every write of the Application name as Forbidden, until the
// returned function removes the policy (also at the test's end).
func refuse(t *testing.T, s *stack.Stack, name string) func() {
	t.Helper()
	allow, err := s.RefuseApplication(t.Context(), policy, name, policyMessage)
	if err != nil {
		t.Fatal(err)
	}
	allowed := false
	remove := func() {
		if !allowed {
			allowed = true
			if err := allow(context.Background()); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(remove)
	return remove
}

// attempt is one write of an Application the API server answered.
type attempt struct {
	at   time.Time
	code int
}

func (a attempt) String() string { return fmt.Sprintf("%s %d", a.at.Format("15:04:05.000"), a.code) }

func gaps(as []attempt) string {
	var out []string
	for i := 1; i < len(as); i++ {
		out = append(out, as[i].at.Sub(as[i-1].at).Round(time.Millisecond).String())
	}
	return strings.Join(out, ", ")
}

// writesOf reads the kube-apiserver's audit log: every create, update or patch of the Application
// name by an applier since since, in order.
func writesOf(t *testing.T, s *stack.Stack, name string, since time.Time) []attempt {
	t.Helper()
	f, err := os.Open(s.AuditLog())
	if err != nil {
		t.Fatalf("read the audit log: %v", err)
	}
	defer f.Close()
	var out []attempt
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte(`{"kind":"Event"`)) {
			continue
		}
		var ev struct {
			Stage            string `json:"stage"`
			Verb             string `json:"verb"`
			ImpersonatedUser *struct {
				Extra map[string][]string `json:"extra"`
			} `json:"impersonatedUser"`
			ObjectRef *struct {
				Resource, Name, Subresource string
			} `json:"objectRef"`
			ResponseStatus *struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
			RequestReceived time.Time `json:"requestReceivedTimestamp"`
		}
		if json.Unmarshal(line, &ev) != nil || ev.Stage != "ResponseComplete" || ev.RequestReceived.Before(since) ||
			ev.ObjectRef == nil || ev.ObjectRef.Resource != "applications" || ev.ObjectRef.Name != name || ev.ObjectRef.Subresource != "" ||
			!slices.Contains([]string{"create", "update", "patch"}, ev.Verb) ||
			ev.ImpersonatedUser == nil || !slices.ContainsFunc(ev.ImpersonatedUser.Extra[stack.InstanceExtra], isApplier) {
			continue
		}
		a := attempt{at: ev.RequestReceived}
		if ev.ResponseStatus != nil {
			a.code = ev.ResponseStatus.Code
		}
		out = append(out, a)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read the audit log: %v", err)
	}
	slices.SortFunc(out, func(a, b attempt) int { return a.at.Compare(b.at) })
	return out
}

// waitAnnotations waits until the Application name exists with annotations that match.
func waitAnnotations(t *testing.T, s *stack.Stack, name, what string, match func(map[string]string) bool) {
	t.Helper()
	var last map[string]string
	if err := testenv.WaitFor(t.Context(), processTimeout, "Application "+name+" "+what, func(ctx context.Context) (bool, error) {
		u, err := s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = u.GetAnnotations()
		return match(last), nil
	}); err != nil {
		t.Fatalf("%v (annotations: %v)", err, last)
	}
}

func isApplier(instance string) bool { return stack.BinaryOf(instance) == v1alpha1.BinaryApplier }

// secrets are the values a person must never read in a condition or the plugin's output: every
// Secret's data in the operator's and the engine's namespaces and the NATS passwords, by name.
func secrets(t *testing.T, s *stack.Stack) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, ns := range []string{stack.OperatorNamespace, stack.EngineNamespace} {
		list, err := s.Kube.CoreV1().Secrets(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, sec := range list.Items {
			for k, v := range sec.Data {
				if len(v) >= 8 {
					out[ns+"/"+sec.Name+"/"+k] = string(v)
				}
			}
		}
	}
	files, err := filepath.Glob(filepath.Join(s.Dir, "nats-secrets", "*.password"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no NATS password files in %s: %v", s.Dir, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out["the NATS password "+filepath.Base(f)] = string(b)
	}
	if len(out) < 2 {
		t.Fatalf("found %d secrets to look for, want the repo-creds password and the NATS passwords", len(out))
	}
	return out
}
