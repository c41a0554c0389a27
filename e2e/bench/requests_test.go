//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/aicr-run/aicr-operator/e2e/benchstat"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// requestCostN is how many requests of a kind one repetition of BenchmarkAPIRequestCost makes:
// enough that the API server's CPU (read in 10 ms clock ticks) is known to about 1%.
const requestCostN = 200

// BenchmarkAPIRequestCost reports the API server CPU each kind of request of a rollout step
// costs, in milliseconds per request: what the overhead's bound (the API server's CPU, which
// saturates this machine) is made of. It copies an Application and the newest RuntimeRollout as
// BenchmarkRolloutOverhead30 left them (the Application with the status the fake Argo CD wrote)
// to an API server of its own, where nothing else runs but one watch per resource (as each
// binary's informer), and makes requestCostN requests of each kind, reps times: the applier's
// server-side apply with a value changed, Argo CD's update of the Application's status, the
// planner's rollout status write holding 0, 2 and 6 steps, an Event, and a GET for the fixed
// cost of a request.
func BenchmarkAPIRequestCost(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for b.Loop() {
		if argo == nil {
			b.Skip("needs BenchmarkRolloutOverhead30's objects")
		}
		app, ro, err := costObjects(ctx)
		if err != nil {
			b.Fatal(err)
		}
		env, err := testenv.Start(testenv.Options{})
		if err != nil {
			b.Fatal(err)
		}
		// The probe's watches end before its API server is stopped: one still open holds the
		// server's graceful shutdown until testenv kills it, 10 s later.
		pctx, pcancel := context.WithCancel(ctx)
		stop := func() {
			pcancel()
			_ = env.Stop()
		}
		p, err := newCostProbe(pctx, env, app, ro)
		if err != nil {
			stop()
			b.Fatal(err)
		}
		var s benchstat.Series
		for range *reps {
			for _, k := range p.kinds() {
				ms, err := p.measure(pctx, k.do)
				if err != nil {
					stop()
					b.Fatalf("%s: %v", k.name, err)
				}
				s.Add(k.name, ms)
			}
		}
		stop()
		var lines []string
		for _, k := range p.kinds() {
			d := s.Get(k.name)
			b.ReportMetric(d.Median, strings.ReplaceAll(k.name, " ", "-")+"-ms")
			lines = append(lines, k.name+" "+d.Format("%.1f", ""))
		}
		results.info("  API server CPU per request (ms), on an API server of its own", strings.Join(lines, "; "))
	}
}

// costObjects reads the Application svc-05 and the newest rollout of the runtime.
func costObjects(ctx context.Context) (app, ro *unstructured.Unstructured, err error) {
	if app, err = h.dyn.Resource(testenv.ApplicationGVR).Namespace(engineNamespace).Get(ctx, "svc-05", metav1.GetOptions{}); err != nil {
		return nil, nil, fmt.Errorf("read application: %w", err)
	}
	list, err := h.dyn.Resource(v1alpha1.RuntimeRolloutResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("list rollouts: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, nil, fmt.Errorf("no rollout to copy")
	}
	sort.Slice(list.Items, func(i, j int) bool {
		return list.Items[i].GetCreationTimestamp().After(list.Items[j].GetCreationTimestamp().Time)
	})
	return app, &list.Items[0], nil
}

// costProbe holds the copies on the probe API server.
type costProbe struct {
	// apiserverPID is the probe kube-apiserver's process, whose CPU is measured.
	apiserverPID int
	apps         dynamic.ResourceInterface
	rollout      dynamic.ResourceInterface
	kube         kubernetes.Interface
	spec         *unstructured.Unstructured // the applier's manifest: metadata and spec
	live         *unstructured.Unstructured // the Application as last written (with status)
	ro           *unstructured.Unstructured // the rollout as last written
	steps        []any
	seq          int
}

// bare is obj without the fields the API server sets.
func bare(obj *unstructured.Unstructured) *unstructured.Unstructured {
	c := obj.DeepCopy()
	for _, f := range []string{"managedFields", "resourceVersion", "uid", "creationTimestamp", "generation"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	return c
}

func newCostProbe(ctx context.Context, env *testenv.Env, app, ro *unstructured.Unstructured) (*costProbe, error) {
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return nil, err
	}
	p := &costProbe{apps: dyn.Resource(testenv.ApplicationGVR).Namespace(engineNamespace), rollout: dyn.Resource(v1alpha1.RuntimeRolloutResource), kube: kube}
	for _, pr := range env.Processes() {
		if pr.Name == "kube-apiserver" {
			p.apiserverPID = pr.PID
		}
	}
	if p.apiserverPID == 0 {
		return nil, fmt.Errorf("no kube-apiserver process in the probe environment")
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: engineNamespace}}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create namespace: %w", err)
	}
	// One watch per resource, drained, as each binary's informer is.
	for _, r := range []dynamic.ResourceInterface{p.apps, p.rollout} {
		w, err := r.Watch(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("watch: %w", err)
		}
		go func() {
			for range w.ResultChan() {
			}
		}()
	}
	if p.live, err = p.apps.Create(ctx, bare(app), metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create application: %w", err)
	}
	meta := map[string]any{"name": app.GetName(), "namespace": engineNamespace}
	for _, f := range []string{"labels", "annotations"} {
		if v, ok, _ := unstructured.NestedFieldCopy(app.Object, "metadata", f); ok {
			meta[f] = v
		}
	}
	p.spec = &unstructured.Unstructured{Object: map[string]any{"apiVersion": app.GetAPIVersion(), "kind": app.GetKind(), "spec": app.Object["spec"], "metadata": meta}}
	status := ro.Object["status"]
	if p.ro, err = p.rollout.Create(ctx, bare(ro), metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create rollout: %w", err)
	}
	p.ro.Object["status"] = status
	p.steps, _, _ = unstructured.NestedSlice(p.ro.Object, "status", "steps")
	return p, nil
}

type costKind struct {
	name string
	do   func(ctx context.Context) error
}

func (p *costProbe) kinds() []costKind {
	ks := []costKind{
		{"GET Application", func(ctx context.Context) error {
			_, err := p.apps.Get(ctx, p.live.GetName(), metav1.GetOptions{})
			return err
		}},
		{"apply Application", p.apply},
		{"update Application status", p.argoStatus},
	}
	for _, n := range []int{0, 2, 6} {
		ks = append(ks, costKind{fmt.Sprintf("rollout status, %d steps", n), func(ctx context.Context) error { return p.rolloutStatus(ctx, n) }})
	}
	return append(ks, costKind{"POST Event", p.event})
}

// measure runs do requestCostN times, after a tenth as many not measured (the change from the
// kind before settles), and returns the API server's CPU milliseconds per request.
func (p *costProbe) measure(ctx context.Context, do func(context.Context) error) (float64, error) {
	for range requestCostN / 10 {
		if err := do(ctx); err != nil {
			return 0, err
		}
	}
	before, err := cpuTicks(p.apiserverPID)
	if err != nil {
		return 0, err
	}
	for range requestCostN {
		if err := do(ctx); err != nil {
			return 0, err
		}
	}
	after, err := cpuTicks(p.apiserverPID)
	if err != nil {
		return 0, err
	}
	return ticksMs(after-before) / requestCostN, nil
}

func (p *costProbe) next() string {
	p.seq++
	return fmt.Sprint(p.seq)
}

// apply is the applier's write of a step: its manifest, one value changed.
func (p *costProbe) apply(ctx context.Context) error {
	m := p.spec.DeepCopy()
	if err := unstructured.SetNestedField(m.Object, p.next(), "spec", "source", "helm", "valuesObject", "bench-seq"); err != nil {
		return err
	}
	body, err := json.Marshal(m.Object)
	if err != nil {
		return err
	}
	force := true
	out, err := p.apps.Patch(ctx, m.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: v1alpha1.FieldManager, Force: &force})
	if err == nil {
		p.live = out
	}
	return err
}

// argoStatus is Argo CD's write of the Application's status (the CRD has no status
// subresource): the whole object, a status field changed.
func (p *costProbe) argoStatus(ctx context.Context) error {
	app := p.live.DeepCopy()
	if err := unstructured.SetNestedField(app.Object, "synced "+p.next(), "status", "operationState", "message"); err != nil {
		return err
	}
	out, err := p.apps.Update(ctx, app, metav1.UpdateOptions{FieldManager: "argocd-application-controller"})
	if err == nil {
		p.live = out
	}
	return err
}

// rolloutStatus is the planner's status write of a rollout holding n steps.
func (p *costProbe) rolloutStatus(ctx context.Context, n int) error {
	r := p.ro.DeepCopy()
	if err := unstructured.SetNestedSlice(r.Object, p.steps[:min(n, len(p.steps))], "status", "steps"); err != nil {
		return err
	}
	if err := unstructured.SetNestedField(r.Object, "step "+p.next(), "status", "message"); err != nil {
		return err
	}
	out, err := p.rollout.UpdateStatus(ctx, r, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManager})
	if err == nil {
		p.ro = out
	}
	return err
}

// event is one of the planner's Events on a rollout.
func (p *costProbe) event(ctx context.Context) error {
	_, err := p.kube.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: p.ro.GetName() + "."},
		InvolvedObject: corev1.ObjectReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "RuntimeRollout", Name: p.ro.GetName(), UID: p.ro.GetUID()},
		Reason:         "RolloutSucceeded", Message: "rollout " + p.next() + ": 30 steps succeeded", Type: corev1.EventTypeNormal,
		Source: corev1.EventSource{Component: "aicr-planner"},
	}, metav1.CreateOptions{})
	return err
}
