//go:build integration

package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"

	"github.com/aicr-run/aicr-operator/planner/internal/rollout"
	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	"github.com/aicr-run/aicr-operator/servicekit/logging"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"
	"github.com/aicr-run/aicr-operator/testkit/natstest"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

const (
	// commandTimeout bounds the wait for the planner's next command.
	commandTimeout = 30 * time.Second
	// statusTimeout bounds the wait for a status the planner writes.
	statusTimeout = 30 * time.Second
	ns            = "aicr-system"
	selfID        = "system:serviceaccount:aicr-system:aicr-planner"
)

// registryAuth is the login of the environment's registry (htpasswd): an ECR-shaped one, user
// AWS and a token as password.
var registryAuth = &testenv.BasicAuth{Username: "AWS", Password: natstest.RandomPassword()}

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, testenv.Options{Registry: true, RegistryAuth: registryAuth}))
}

// harness is the test acting as applier and readiness.
type harness struct {
	t     *testing.T
	env   *testenv.Env
	core  kubernetes.Interface
	kube  *Kube
	nats  *natstest.Server
	js    jetstream.JetStream
	cmds  jetstream.Consumer
	pub   *bus.Publisher
	seen  map[string]int      // command message IDs received
	order []string            // "release(Action)" in order
	name  string              // the runtime's name
	seqs  []rolloutSeq        // the largest ordering token of each rollout's commands, in order of the rollouts' first commands
	clock clock.WithTicker    // the next planner's clock (nil: the real one)
	apps  cache.ListerWatcher // the next planner's owned Applications (nil: none watched)
}

// rolloutSeq is the largest ordering token (bus.StepRef.Seq) of one rollout's commands.
type rolloutSeq struct{ uid, max string }

// newHarness is newBareHarness with readiness's report that Argo CD is available already on
// the bus, as it is once readiness runs: without one no step starts.
func newHarness(t *testing.T) *harness {
	h := newBareHarness(t)
	h.reportEngine("engine/available", &bus.EngineStatus{Available: true, Reason: v1alpha1.ReasonEngineAvailable, Message: "test harness"})
	return h
}

// reportEngine publishes an engine report as readiness does.
func (h *harness) reportEngine(id string, e *bus.EngineStatus) {
	h.t.Helper()
	if err := bus.NewPublisher(h.js, "readiness").Publish(context.Background(), bus.SubjectEngine, id, e); err != nil {
		h.t.Fatal(err)
	}
}

// newBareHarness starts NATS with the streams and both consumers declared, and nothing
// published.
func newBareHarness(t *testing.T) *harness {
	env := testenv.Current(t)
	core := kubernetes.NewForConfigOrDie(env.Config)
	kube, err := NewKube(env.Config, core)
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	ctx := context.Background()
	cmds, err := dispatch.EnsureConsumer(ctx, js, bus.ConsumerApplier, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dispatch.EnsureConsumer(ctx, js, bus.ConsumerPlanner, 1); err != nil {
		t.Fatal(err)
	}
	_, err = core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	return &harness{t: t, env: env, core: core, kube: kube, nats: srv, js: js, cmds: cmds, pub: bus.NewPublisher(js, "test"), seen: map[string]int{}, name: "cluster"}
}

// startPlanner runs a planner (controller + dispatcher) until the returned stop is called.
func (h *harness) startPlanner() (stop func()) {
	return h.startPlannerWith(nil)
}

// startPlannerWith runs a planner that pulls OCI bundles with bundles.
func (h *harness) startPlannerWith(bundles BundlePuller) (stop func()) {
	return h.startPlannerOn(bundles, h.kube, bus.NewPublisher(h.js, "planner"))
}

// startPlannerOn runs a planner writing through store and publishing through pub.
func (h *harness) startPlannerOn(bundles BundlePuller, store Store, pub Publisher) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	log := zerolog.New(zerolog.NewTestWriter(h.t)).Level(zerolog.InfoLevel)
	ctx = logging.Into(ctx, log)
	rec, stopEvents := NewRecorder(h.core, "planner-test")
	c := New(Config{Name: "planner", Namespace: ns, EngineNamespace: "argocd", Identities: []string{selfID}, Recorder: rec, Bundles: bundles, Clock: h.clock, Applications: h.apps},
		store, pub)
	cons, err := dispatch.EnsureConsumer(ctx, h.js, bus.ConsumerPlanner, 1)
	if err != nil {
		h.t.Fatal(err)
	}
	// As the planner's app does: the newest reports first, then the controller and dispatcher.
	c.Restore(ctx, func(ctx context.Context, subject string) (*dispatch.Message, error) {
		return dispatch.Last(ctx, h.js, bus.StreamEvents, subject)
	})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = c.Run(ctx, h.kube, h.core) }()
	go func() {
		defer wg.Done()
		_ = (&dispatch.Dispatcher{Consumer: cons, Routes: c.Routes(), Workers: 4}).Run(ctx)
	}()
	return func() { cancel(); wg.Wait(); stopEvents() }
}

type command struct {
	msgID   string
	apply   *bus.ApplyCommand
	remove  *bus.RemoveCommand
	release string
	step    bus.StepRef
	action  v1alpha1.StepAction
}

// next fetches the planner's next command, or returns nil after wait.
func (h *harness) next(wait time.Duration) *command {
	h.t.Helper()
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		batch, err := h.cmds.Fetch(1, jetstream.FetchMaxWait(min(time.Until(deadline), 5*time.Second)))
		if err != nil {
			h.t.Fatalf("fetch command: %v", err)
		}
		if msg, ok := <-batch.Messages(); ok {
			return h.decode(msg)
		}
	}
	return nil
}

// checkSeq holds the planner to the ordering token's promise: every rollout step's command
// carries one, and the first command of a rollout carries a larger one than every command of
// the rollouts before it, whatever the planner's clock says.
func (h *harness) checkSeq(c *command) {
	h.t.Helper()
	if c.step.Rollout == "" {
		return
	}
	if _, ok := v1alpha1.CompareSeq(c.step.Seq, c.step.Seq); !ok {
		h.t.Errorf("command %s of rollout %s carries no ordering token (seq %q)", c.msgID, c.step.Rollout, c.step.Seq)
		return
	}
	for i := range h.seqs {
		if h.seqs[i].uid == c.step.RolloutUID {
			if cmp, _ := v1alpha1.CompareSeq(c.step.Seq, h.seqs[i].max); cmp > 0 {
				h.seqs[i].max = c.step.Seq
			}
			return
		}
	}
	for _, earlier := range h.seqs {
		if cmp, _ := v1alpha1.CompareSeq(c.step.Seq, earlier.max); cmp <= 0 {
			h.t.Errorf("command %s of rollout %s carries seq %s, not after %s of an earlier rollout's command", c.msgID, c.step.Rollout, c.step.Seq, earlier.max)
		}
	}
	h.seqs = append(h.seqs, rolloutSeq{uid: c.step.RolloutUID, max: c.step.Seq})
}

// noCommand fails when a command is in the stream now. Call it after a positive event proving the
// planner processed the input that must not start anything: the runtime's status, which a sync
// writes last, after it published what it decided (JetStream stores a message before its publish
// returns), so a command that sync published would be here.
func (h *harness) noCommand(after string) {
	h.t.Helper()
	batch, err := h.cmds.FetchNoWait(1)
	if err != nil {
		h.t.Fatalf("fetch command: %v", err)
	}
	for msg := range batch.Messages() {
		c := h.decode(msg)
		h.t.Fatalf("%s started %s(%s)", after, c.release, c.action)
	}
	if err := batch.Error(); err != nil {
		h.t.Fatalf("fetch command: %v", err)
	}
}

// decode acks and decodes a command, and records it in seen and order.
func (h *harness) decode(msg jetstream.Msg) *command {
	h.t.Helper()
	_ = msg.Ack()
	var hd bus.Header
	if err := json.Unmarshal(msg.Data(), &hd); err != nil {
		h.t.Fatal(err)
	}
	c := &command{msgID: hd.ID}
	switch hd.Type {
	case bus.TypeApplyCommand:
		c.apply = &bus.ApplyCommand{}
		_ = json.Unmarshal(msg.Data(), c.apply)
		c.release, c.step, c.action = c.apply.Release, c.apply.Step, c.apply.Action
	case bus.TypeRemoveCommand:
		c.remove = &bus.RemoveCommand{}
		_ = json.Unmarshal(msg.Data(), c.remove)
		c.release, c.step, c.action = c.remove.Release, c.remove.Step, v1alpha1.ActionRemove
	}
	if c.step.Rollout != "" && c.step.RolloutUID == "" {
		// Readiness echoes it on its verdicts (below), and a verdict naming the wrong
		// rollout object is ignored: without it a namesake rollout's verdict counts.
		h.t.Errorf("command %s of rollout %s names no rollout UID", c.msgID, c.step.Rollout)
	}
	h.checkSeq(c)
	h.seen[c.msgID]++
	h.order = append(h.order, fmt.Sprintf("%s(%s)", c.release, c.action))
	return c
}

func (h *harness) mustNext() *command {
	h.t.Helper()
	c := h.next(commandTimeout)
	if c == nil {
		h.t.Fatalf("no command within %s (so far: %v)", commandTimeout, h.order)
	}
	return c
}

// answer publishes the applier's result and, for a write, readiness's ready verdict.
func (h *harness) answer(c *command) {
	h.t.Helper()
	ctx := context.Background()
	outcome := bus.OutcomeWritten
	if c.remove != nil {
		outcome = bus.OutcomeRemoved
	}
	res := &bus.ApplyResult{CommandID: c.msgID, Runtime: h.name, Release: c.release, Step: c.step, Action: c.action, Outcome: outcome}
	if err := h.pub.Publish(ctx, bus.AppliedSubject(h.name, c.release), c.msgID+"/result", res); err != nil {
		h.t.Fatal(err)
	}
	if c.remove != nil {
		return
	}
	v := &bus.ReleaseVerdict{Runtime: h.name, Release: c.release, StepID: c.step.ID, RolloutUID: c.step.RolloutUID, PlanDigest: c.apply.PlanDigest, Ready: true,
		Fences: []v1alpha1.Fence{{Name: v1alpha1.FenceHealthy, State: v1alpha1.FencePassed}}}
	if err := h.pub.Publish(ctx, bus.VerdictSubject(h.name, c.release), c.step.ID+"/ready", v); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) runtime() *v1alpha1.ClusterRuntime {
	rt, err := h.kube.GetRuntime(context.Background(), h.name)
	if err != nil {
		h.t.Fatal(err)
	}
	return rt
}

func (h *harness) waitRuntime(what string, cond func(rt *v1alpha1.ClusterRuntime) bool) *v1alpha1.ClusterRuntime {
	h.t.Helper()
	var last *v1alpha1.ClusterRuntime
	err := testenv.WaitFor(context.Background(), statusTimeout, what, func(ctx context.Context) (bool, error) {
		rt, err := h.kube.GetRuntime(ctx, h.name)
		if err != nil {
			return false, err
		}
		last = rt
		return cond(rt), nil
	})
	if err != nil {
		b, _ := json.MarshalIndent(last.Status, "", "  ")
		h.t.Fatalf("%v\nstatus: %s", err, b)
	}
	return last
}

func condReason(rt *v1alpha1.ClusterRuntime, typ string) string {
	if c := meta.FindStatusCondition(rt.Status.Conditions, typ); c != nil {
		return c.Reason
	}
	return ""
}

func bundleYAML(t *testing.T, comps []map[string]any) string {
	b, err := yaml.Marshal(map[string]any{
		"apiVersion": plan.BundleAPIVersion, "kind": plan.BundleKind,
		"metadata": map[string]any{"name": "gpu-stack", "version": "1.0.0"}, "components": comps,
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func component(name string, ver int, deps ...string) map[string]any {
	c := map[string]any{"name": name, "namespace": name,
		"chart": map[string]any{"path": "charts/" + name, "digest": fmt.Sprintf("sha256:%064x", ver)}, "values": map[string]any{"replicas": 1}}
	if len(deps) > 0 {
		c["dependsOn"] = deps
	}
	return c
}

// TestRolloutThroughTheBus rolls a six-release bundle with a diamond out with the test acting
// as applier and readiness over NATS, restarts the planner mid-rollout, then changes the
// bundle: an Upgrade, a gate's Apply and a Remove that waits for a person's approval.
func TestRolloutThroughTheBus(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	v1 := []map[string]any{
		component("cert-manager", 1),
		component("nfd", 1, "cert-manager"),
		component("prometheus", 1, "cert-manager"),
		component("gpu-operator", 1, "nfd", "prometheus"),
		component("network-operator", 1, "nfd"),
		func() map[string]any {
			c := component("gpu-gate", 1, "gpu-operator")
			c["readinessGate"] = true
			return c
		}(),
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bundle", Namespace: ns}, Data: map[string]string{"bundle.yaml": bundleYAML(t, v1)}}
	if _, err := h.core.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rt := &v1alpha1.ClusterRuntime{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}, Spec: v1alpha1.ClusterRuntimeSpec{
		Bundle: v1alpha1.BundleSource{ConfigMap: &v1alpha1.ConfigMapBundleSource{Name: "bundle"}},
	}}
	if err := h.kube.rc.Post().Resource(resRuntimes).Body(rt).Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}

	stop := h.startPlanner()
	// First rollout: every release installed, one step at a time, in dependency order.
	var first []*command
	for range 4 {
		c := h.mustNext()
		first = append(first, c)
		if len(first) < 4 {
			h.answer(c)
		}
	}
	// The planner dies with step 4 in flight, and a new one takes over.
	stop()
	stop = h.startPlanner()
	defer func() { stop() }()
	h.answer(first[3])
	for range 2 {
		h.answer(h.mustNext())
	}
	wantOrder := []string{"cert-manager(Install)", "nfd(Install)", "prometheus(Install)", "gpu-operator(Install)", "network-operator(Install)", "gpu-gate(Install)"}
	if fmt.Sprint(h.order) != fmt.Sprint(wantOrder) {
		t.Fatalf("command order\n got %v\nwant %v", h.order, wantOrder)
	}
	for id, n := range h.seen {
		if n > 1 {
			t.Errorf("command %s delivered %d times", id, n)
		}
	}
	got := h.waitRuntime("runtime Ready=True RolledOut", func(rt *v1alpha1.ClusterRuntime) bool {
		return condReason(rt, v1alpha1.ConditionReady) == v1alpha1.ReasonRolledOut
	})
	firstDigest := got.Status.ActivePlan
	if firstDigest == "" || got.Status.EnginePolicy != v1alpha1.EnginePolicyArgoCDV2 {
		t.Fatalf("active plan %q, engine policy %q", firstDigest, got.Status.EnginePolicy)
	}

	// Second rollout: gpu-operator upgraded, network-operator removed.
	v2 := []map[string]any{v1[0], v1[1], v1[2], component("gpu-operator", 2, "nfd", "prometheus"), v1[5]}
	cm, _ = h.core.CoreV1().ConfigMaps(ns).Get(ctx, "bundle", metav1.GetOptions{})
	cm.Data["bundle.yaml"] = bundleYAML(t, v2)
	if _, err := h.core.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.order = nil
	h.answer(h.mustNext())
	h.answer(h.mustNext())
	if fmt.Sprint(h.order) != fmt.Sprint([]string{"gpu-operator(Upgrade)", "gpu-gate(Apply)"}) {
		t.Fatalf("second rollout order %v", h.order)
	}
	got = h.waitRuntime("runtime Stalled=True AwaitingApproval", func(rt *v1alpha1.ClusterRuntime) bool {
		return condReason(rt, v1alpha1.ConditionStalled) == v1alpha1.ReasonAwaitingApproval
	})
	name := got.Status.Rollout
	second, err := h.kube.GetRollout(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	h.waitEvents("RuntimeRollout", name, second.UID, map[string]int{rollout.EventAwaitingApproval: 1})
	// An approval by the operator's own identity is ignored.
	h.setApproval(name, selfID)
	h.waitRuntime("runtime Stalled naming the ignored approval", func(rt *v1alpha1.ClusterRuntime) bool {
		c := meta.FindStatusCondition(rt.Status.Conditions, v1alpha1.ConditionStalled)
		return c != nil && c.Reason == v1alpha1.ReasonAwaitingApproval &&
			strings.Contains(c.Message, "the approval by "+selfID+" is ignored: it is one of the operator's own identities")
	})
	h.noCommand("the operator's own approval")
	h.setApproval(name, "alice@example.com")
	c := h.mustNext()
	if c.remove == nil || c.release != "network-operator" {
		t.Fatalf("after approval got %s(%s), want network-operator(Remove)", c.release, c.action)
	}
	h.answer(c)
	got = h.waitRuntime("runtime rolled out to the second plan", func(rt *v1alpha1.ClusterRuntime) bool {
		return condReason(rt, v1alpha1.ConditionReady) == v1alpha1.ReasonRolledOut && rt.Status.ActivePlan != firstDigest
	})
	// The outcome label is written after the runtime's Ready (it does not delay it).
	r := h.waitRollout(name, func(r *v1alpha1.RuntimeRollout) bool { return r.Labels[v1alpha1.LabelOutcome] != "" })
	if r.Labels[v1alpha1.LabelOutcome] != v1alpha1.OutcomeSucceeded || r.Spec.FromDigest != firstDigest || r.Spec.ToDigest != got.Status.ActivePlan {
		t.Errorf("rollout %s: outcome label %q, from %s, to %s", name, r.Labels[v1alpha1.LabelOutcome], r.Spec.FromDigest, r.Spec.ToDigest)
	}

	// After its rollout, nfd stops being ready: the runtime is NotReady naming it and its open
	// fence, with no command; a verdict older than that is ignored; recovery is RolledOut.
	nfdStep := v1alpha1.StepID(rollout.Name("", firstDigest), 2)
	health := func(rv string, ready bool) {
		t.Helper()
		v := &bus.ReleaseVerdict{Runtime: "cluster", Release: "nfd", StepID: nfdStep, PlanDigest: firstDigest, Ready: ready,
			Observed: bus.ObservedStatus{ResourceVersion: rv}}
		if !ready {
			v.Fences = []v1alpha1.Fence{{Name: v1alpha1.FenceHealthy, State: v1alpha1.FenceOpen, Message: "Degraded: some resources are failing"}}
		}
		if err := h.pub.Publish(ctx, bus.VerdictSubject("cluster", "nfd"), fmt.Sprintf("nfd/health/%s", rv), v); err != nil {
			t.Fatal(err)
		}
	}
	health("5000", false)
	got = h.waitRuntime("runtime Ready=False NotReady naming nfd", func(rt *v1alpha1.ClusterRuntime) bool {
		c := meta.FindStatusCondition(rt.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == v1alpha1.ReasonNotReady && strings.Contains(c.Message, "release nfd is not ready") &&
			strings.Contains(c.Message, "Healthy Open: Degraded")
	})
	if len(got.Status.Releases) != 1 || got.Status.Releases[0].Release != "nfd" || got.Status.Releases[0].Ready {
		t.Errorf("status.releases %+v, want nfd not ready", got.Status.Releases)
	}
	h.noCommand("a release that stopped being ready")
	health("4999", true) // judged before the not-ready one: delivered late
	health("5001", true)
	got = h.waitRuntime("runtime Ready=True RolledOut once nfd recovered", func(rt *v1alpha1.ClusterRuntime) bool {
		return condReason(rt, v1alpha1.ConditionReady) == v1alpha1.ReasonRolledOut
	})
	if len(got.Status.Releases) != 1 || !got.Status.Releases[0].Ready || got.Status.Releases[0].ResourceVersion != "5001" {
		t.Errorf("status.releases %+v, want nfd ready at 5001", got.Status.Releases)
	}

	// Drift with no rollout in flight: forced back at once, with FieldOwnershipOverridden.
	drift := &bus.DriftReport{Runtime: "cluster", Release: "nfd", PlanDigest: got.Status.ActivePlan,
		Kinds: []string{bus.DriftAutoSyncDisabled}, Fields: []string{"spec.syncPolicy.automated.enabled"}, ResourceVersion: "4242"}
	if err := h.pub.Publish(ctx, bus.DriftSubject("cluster", "nfd"), "drift/nfd/4242", drift); err != nil {
		t.Fatal(err)
	}
	c = h.mustNext()
	if c.apply == nil || c.release != "nfd" || c.apply.PlanDigest != got.Status.ActivePlan || !strings.HasPrefix(c.step.ID, "repair/") {
		t.Fatalf("repair command %+v", c.apply)
	}
	h.answer(c) // the applier wrote it back
	h.waitEvents("ClusterRuntime", "cluster", got.UID, map[string]int{v1alpha1.EventFieldOwnershipOverridden: 1, rollout.EventDriftRepaired: 1,
		EventRolloutCreated: 2, v1alpha1.OutcomeSucceeded: 2})
	h.waitEvents("RuntimeRollout", name, second.UID, map[string]int{EventRolloutCreated: 1,
		rollout.EventAwaitingApproval: 1, v1alpha1.OutcomeSucceeded: 1})
}

func (h *harness) setApproval(name, by string) {
	h.t.Helper()
	ctx := context.Background()
	r, err := h.kube.GetRollout(ctx, name)
	if err != nil {
		h.t.Fatal(err)
	}
	now := metav1.Now()
	r.Spec.Approval = &v1alpha1.Approval{ApprovedBy: by, Reason: "network-operator is replaced", ApprovedAt: &now}
	if _, err := h.kube.UpdateRollout(ctx, r); err != nil {
		h.t.Fatal(err)
	}
}
