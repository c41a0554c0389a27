//go:build integration

package app

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/kubernetes"

	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	"github.com/aicr-run/aicr-operator/servicekit/service"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"
	"github.com/aicr-run/aicr-operator/testkit/natstest"
	"github.com/aicr-run/aicr-operator/testkit/servicetest"
	"github.com/aicr-run/aicr-operator/testkit/testenv"

	"github.com/aicr-run/aicr-operator/readiness/internal/watch"
)

// Named timeouts of the waits below.
const (
	readyTimeout   = 30 * time.Second
	messageTimeout = 30 * time.Second
	stopTimeout    = 15 * time.Second
)

// No Argo CD CRDs at start: the watcher must find them when they are installed later. The API
// server logs every list, watch and get of an Application, which TestReadiness reads to prove
// readiness asks only for the Applications it owns.
func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, testenv.Options{SkipArgoCRDs: true, AuditApplications: true}))
}

// applicationReads are readiness's lists, watches and gets of Applications in the audit log.
func applicationReads(t *testing.T) []testenv.AuditEvent {
	t.Helper()
	return testenv.Current(t).ApplicationReads(t, service.UserAgent(Name))
}

// running is one readiness binary started with Run.
type running struct {
	health string
	done   chan error
	cancel context.CancelFunc
}

func start(t *testing.T, env *testenv.Env, natsURL string, extra ...string) *running {
	t.Helper()
	fs := flag.NewFlagSet(Name, flag.ContinueOnError)
	var o Options
	o.BindFlags(fs)
	args := append([]string{
		"--nats-url", natsURL, "--kubeconfig", env.Kubeconfig, "--health-addr", "127.0.0.1:0", "--metrics-addr", "",
		"--namespace", "aicr-system", "--log-level", "debug", "--registry-repository", "registry.example.com/aicr",
	}, extra...)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	o.started = func(a string) { addr <- a }
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{done: make(chan error, 1), cancel: cancel}
	go func() { r.done <- Run(ctx, o) }()
	select {
	case r.health = <-addr:
	case err := <-r.done:
		t.Fatalf("readiness exited at start: %v", err)
	case <-time.After(readyTimeout):
		t.Fatalf("readiness did not listen within %s", readyTimeout)
	}
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels and expects a clean exit.
func (r *running) stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("readiness exited with %v, want a clean exit", err)
		}
	case <-time.After(stopTimeout):
		t.Errorf("readiness did not stop within %s", stopTimeout)
	}
}

func (r *running) readyz() (int, string) {
	resp, err := http.Get("http://" + r.health + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// eventually is servicetest.Eventually.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	servicetest.Eventually(t, timeout, what, cond)
}

// events subscribes to every event subject (core NATS sees what JetStream stores).
type events struct {
	sub *nats.Subscription
}

func subscribe(t *testing.T, ns *natstest.Server) *events {
	t.Helper()
	nc, _ := ns.Connect(t)
	sub, err := nc.SubscribeSync(bus.SubjectEvents)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &events{sub: sub}
}

// next returns the next message of type typ that satisfies match, decoded into into.
func (e *events) next(t *testing.T, typ string, into any, match func() bool) {
	t.Helper()
	deadline := time.Now().Add(messageTimeout)
	for {
		msg, err := e.sub.NextMsg(time.Until(deadline))
		if err != nil {
			t.Fatalf("no %s matching within %s: %v", typ, messageTimeout, err)
		}
		var h bus.Header
		if json.Unmarshal(msg.Data, &h) != nil || h.Type != typ {
			continue
		}
		if err := json.Unmarshal(msg.Data, into); err != nil {
			t.Fatalf("decode %s: %v", typ, err)
		}
		if match() {
			return
		}
	}
}

func TestReadiness(t *testing.T) {
	env := testenv.Current(t)
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	argo, err := argoapp.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"argocd", "aicr-system"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}

	t.Run("with NATS unreachable the binary stays not ready and still stops cleanly", func(t *testing.T) {
		// An address that takes each connection and closes it: each attempt the binary makes to
		// reach NATS is seen, and fails.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ln.Close() })
		attempts := make(chan struct{}, 64)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_ = c.Close()
				select {
				case attempts <- struct{}{}:
				default:
				}
			}
		}()
		r := start(t, env, "nats://"+ln.Addr().String())
		// Two attempts refused: the binary has tried NATS, failed, and is retrying.
		for i := range 2 {
			select {
			case <-attempts:
			case <-time.After(messageTimeout):
				t.Fatalf("the binary made %d attempts to reach NATS within %s, want 2", i, messageTimeout)
			}
		}
		if code, body := r.readyz(); code == http.StatusOK {
			t.Fatalf("/readyz is OK without NATS: %s", body)
		}
		r.stop(t)
	})

	ns := natstest.Start(t)
	_, setup := ns.Connect(t)
	if _, err := dispatch.EnsureSetup(ctx, setup, 1); err != nil { // the planner's part
		t.Fatal(err)
	}
	ev := subscribe(t, ns)
	r := start(t, env, ns.URL)

	t.Run("readyz turns ready against NATS and the apiserver", func(t *testing.T) {
		eventually(t, readyTimeout, "/readyz 200", func() (bool, string) {
			code, body := r.readyz()
			return code == http.StatusOK, fmt.Sprintf("%d %s", code, body)
		})
	})

	t.Run("Argo CD CRDs missing: EngineMissing", func(t *testing.T) {
		var st bus.EngineStatus
		ev.next(t, bus.TypeEngineStatus, &st, func() bool { return st.Reason == v1alpha1.ReasonEngineMissing })
		if st.Available {
			t.Errorf("engine status %+v", st)
		}
	})

	t.Run("CRDs installed after start are picked up: ProjectMissing, then available", func(t *testing.T) {
		if err := env.InstallArgoCRDs(ctx); err != nil {
			t.Fatal(err)
		}
		var st bus.EngineStatus
		ev.next(t, bus.TypeEngineStatus, &st, func() bool { return st.Reason == v1alpha1.ReasonProjectMissing })
		proj := `{"apiVersion":"argoproj.io/v1alpha1","kind":"AppProject","metadata":{"name":"aicr","namespace":"argocd"},"spec":{}}`
		if err := argo.RESTClient().Post().Namespace("argocd").Resource(argoapp.ResourceAppProjects).Body([]byte(proj)).Do(ctx).Error(); err != nil {
			t.Fatal(err)
		}
		ev.next(t, bus.TypeEngineStatus, &st, func() bool { return st.Available && st.Reason == v1alpha1.ReasonEngineAvailable })
	})

	// A plan with one release, stored the way the planner stores it.
	b, err := plan.ParseBundle([]byte(bundle))
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Resolve(b, plan.Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	cm, err := p.ConfigMap("aicr-system")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps("aicr-system").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rel, _ := p.Release("gpu-operator")
	settings := appspec.Settings{EngineNamespace: "argocd", Project: "aicr", Repository: "registry.example.com/aicr"}
	desired, err := appspec.Build(settings, appspec.Input{Runtime: "cluster", RuntimeUID: "rt-uid", PlanDigest: p.Digest(), Release: rel, StepID: "r-1/1", StepStarted: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	desired.Annotations[v1alpha1.AnnotationStepWrite] = v1alpha1.StepWriteChanged
	// The step's refresh request, as the applier leaves it once Argo CD answered it.
	desired.Annotations[v1alpha1.AnnotationRefreshFor] = v1alpha1.AnnotatedStepToken(desired.Annotations)
	// The test writes as Argo CD and people do (Create, Update): a generic client, test only.
	apps := gentype.NewClient(argoapp.ResourceApplications, argo.RESTClient(), metav1.ParameterCodec, "argocd", func() *argoapp.Application { return &argoapp.Application{} })

	t.Run("status written the way Argo CD writes it gives the right verdicts", func(t *testing.T) {
		app, err := apps.Create(ctx, desired.DeepCopy(), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var v bus.ReleaseVerdict
		ev.next(t, bus.TypeReleaseVerdict, &v, func() bool { return v.Release == "gpu-operator" })
		if v.Ready || v.StepID != "r-1/1" {
			t.Fatalf("a new Application's verdict: %+v", v)
		}
		// Argo CD: automated sync Running with the new comparedTo (it copies the comparison
		// exceptions in too), Synced/Healthy while the PostSync hook runs. A plain update: the CRD has no status subresource.
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		app.Operation = &argoapp.Operation{Sync: &argoapp.SyncOperation{Revision: app.Spec.Source.TargetRevision}, InitiatedBy: argoapp.OperationInitiator{Automated: true}}
		app.Status = argoapp.ApplicationStatus{
			Sync:           argoapp.SyncStatus{Status: argoapp.SyncStatusCodeSynced, Revision: app.Spec.Source.TargetRevision, ComparedTo: argoapp.ComparedTo{Source: *app.Spec.Source.DeepCopy(), Destination: app.Spec.Destination, IgnoreDifferences: app.Spec.IgnoreDifferences}},
			Health:         argoapp.AppHealthStatus{Status: "Healthy", LastTransitionTime: &now},
			ReconciledAt:   &now,
			OperationState: &argoapp.OperationState{Phase: argoapp.OperationRunning, Message: "waiting for completion of hook batch/Job/gpu-operator-post", StartedAt: now, Operation: *app.Operation.DeepCopy()},
		}
		if app, err = apps.Update(ctx, app, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		ev.next(t, bus.TypeReleaseVerdict, &v, func() bool { return v.Observed.OperationPhase == "Running" })
		if v.Ready {
			t.Fatalf("ready while the PostSync hook runs: %+v", v)
		}
		// The sync succeeds: Argo CD clears .operation in the same write.
		app.Operation = nil
		app.Status.OperationState.Phase = argoapp.OperationSucceeded
		app.Status.OperationState.Message = "successfully synced (no more tasks)"
		app.Status.OperationState.FinishedAt = &now
		app.Status.OperationState.SyncResult = &argoapp.SyncOperationResult{Revision: app.Spec.Source.TargetRevision, Source: *app.Spec.Source.DeepCopy()}
		if _, err = apps.Update(ctx, app, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		ev.next(t, bus.TypeReleaseVerdict, &v, func() bool { return v.Ready })
		for _, f := range v.Fences {
			if f.State != v1alpha1.FencePassed {
				t.Errorf("ready verdict with fence %+v", f)
			}
		}
	})

	t.Run("drift kinds are reported, and their end", func(t *testing.T) {
		app, err := apps.Get(ctx, "gpu-operator", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		orig := app.DeepCopy()
		app.Spec.Destination.Namespace = "elsewhere"
		no := false
		app.Spec.SyncPolicy.Automated.Enabled = &no
		app.Spec.Source.Helm.ValuesObject.Raw = []byte(`{"replicas":5}`)
		if app, err = apps.Update(ctx, app, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
			t.Fatal(err)
		}
		var d bus.DriftReport
		ev.next(t, bus.TypeDriftReport, &d, func() bool { return len(d.Kinds) > 0 })
		want := []string{bus.DriftAutoSyncDisabled, bus.DriftDestination, bus.DriftValues}
		if fmt.Sprint(d.Kinds) != fmt.Sprint(want) {
			t.Errorf("drift kinds = %v, want %v (fields %v, managers %v)", d.Kinds, want, d.Fields, d.Managers)
		}
		app.Spec = orig.Spec
		if _, err = apps.Update(ctx, app, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		ev.next(t, bus.TypeDriftReport, &d, func() bool { return len(d.Kinds) == 0 })
	})

	t.Run("deleting an owned Application by hand is reported Deleted", func(t *testing.T) {
		if err := apps.Delete(ctx, "gpu-operator", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		var d bus.DriftReport
		ev.next(t, bus.TypeDriftReport, &d, func() bool { return len(d.Kinds) == 1 && d.Kinds[0] == bus.DriftDeleted })
		if d.Release != "gpu-operator" || d.Runtime != "cluster" {
			t.Errorf("deleted report %+v", d)
		}
	})

	t.Run("cancel gives a clean exit", func(t *testing.T) {
		r.stop(t)
	})

	// An Argo CD namespace shared with other tools: readiness lists and watches only the
	// Applications the operator owns (watch.Selector), and reads no other one, whether they
	// were there before it started or came after.
	t.Run("only owned Applications are listed, watched or read", func(t *testing.T) {
		const foreign = 300
		create := func(from, to int) {
			t.Helper()
			for i := from; i < to; i++ {
				a := desired.DeepCopy()
				a.Name = fmt.Sprintf("foreign-%03d", i)
				a.Labels = map[string]string{v1alpha1.LabelManagedBy: "another-tool"}
				if i%2 == 1 {
					a.Labels = nil
				}
				if _, err := apps.Create(ctx, a, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		create(0, foreign/2)
		r := start(t, env, ns.URL)
		defer r.stop(t)
		create(foreign/2, foreign)
		// An owned Application after the foreign ones: its verdict says readiness listed and
		// watched, and that the watch delivered what came after the foreign ones.
		if _, err := apps.Create(ctx, desired.DeepCopy(), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var v bus.ReleaseVerdict
		ev.next(t, bus.TypeReleaseVerdict, &v, func() bool { return v.Release == "gpu-operator" })
		r.stop(t)

		reads := applicationReads(t)
		selector := watch.Selector.String()
		listed := 0
		for _, e := range reads {
			u, err := url.Parse(e.RequestURI)
			if err != nil {
				t.Fatalf("audit request URI %q: %v", e.RequestURI, err)
			}
			switch e.Verb {
			case "list", "watch":
				listed++
				if got := u.Query().Get("labelSelector"); got != selector {
					t.Errorf("readiness's %s %s selects %q, want %q", e.Verb, e.RequestURI, got, selector)
				}
			default:
				if strings.HasPrefix(e.ObjectRef.Name, "foreign-") {
					t.Errorf("readiness read a foreign Application: %s %s", e.Verb, e.RequestURI)
				}
			}
		}
		if listed == 0 {
			t.Fatalf("the audit log holds no list or watch of Applications by %s (%d reads): nothing proven", service.UserAgent(Name), len(reads))
		}
	})
}

const bundle = `apiVersion: bundle.aicr.run/v1alpha1
kind: Bundle
metadata: {name: test, version: 1.0.0}
components:
- name: gpu-operator
  namespace: gpu-operator
  chart: {path: charts/gpu-operator, digest: "sha256:db3440cd1cf81965a768c454a0dd5323fff8a29d663559ceee99e219f32f11a4"}
  values: {replicas: 2}
`
