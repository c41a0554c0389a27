//go:build integration

package app

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"
	"github.com/aicr-run/aicr-operator/testkit/natstest"
	"github.com/aicr-run/aicr-operator/testkit/servicetest"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// applyTimeout bounds a command's round trip through the running binary.
const applyTimeout = time.Minute

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, testenv.Options{}))
}

// TestIntegrationRunAppliesAndRemoves runs the real binary against a real API server and an
// in-process JetStream: an ApplyCommand becomes an Application and a Written result; a
// RemoveCommand runs the Remove sequence and answers Removed once the Application is gone.
func TestIntegrationRunAppliesAndRemoves(t *testing.T) {
	env := testenv.Current(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	argo, err := argoapp.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	apps := argo.Applications("argocd-it")
	for _, ns := range []string{"argocd-it", "aicr-it"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create namespace %s: %v", ns, err)
		}
	}
	b, err := plan.ParseBundle([]byte(`apiVersion: bundle.aicr.run/v1alpha1
kind: Bundle
metadata: {name: it, version: 1.0.0}
components:
- {name: nfd, namespace: nfd, chart: {path: charts/nfd, digest: "sha256:` + strings.Repeat("a", 64) + `"}, values: {a: 1}}
`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Resolve(b, plan.Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	cm, _ := p.ConfigMap("aicr-it")
	if _, err := kube.CoreV1().ConfigMaps("aicr-it").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("store plan: %v", err)
	}

	ns := natstest.Start(t)
	health := servicetest.FreeAddr(t)
	args := []string{"--nats-url=" + ns.URL, "--kubeconfig=" + env.Kubeconfig, "--health-addr=" + health, "--metrics-addr=",
		"--namespace=aicr-it", "--engine-namespace=argocd-it", "--registry-repository=registry.example.com/aicr", "--log-level=warn"}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	exit, stderr := start(rctx, t, args)
	servicetest.Poll(t, startTimeout, "/readyz", func() error {
		code, body, err := readyz(health)
		if err != nil {
			return err
		}
		if code != 200 {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})

	_, js := ns.Connect(t)
	if _, err := dispatch.EnsureSetup(ctx, js, 1); err != nil { // the planner's part
		t.Fatal(err)
	}
	pub := bus.NewPublisher(js, "test")
	step := bus.StepRef{Rollout: "r1", Index: 1, ID: "r1/1", Started: time.Now()}
	apply := bus.NewApplyCommand("cluster", "uid-it", step, "nfd", v1alpha1.ActionInstall, p.Digest(), false, nil)
	if err := pub.Publish(ctx, bus.ApplySubject("cluster", "nfd"), "r1/1/1", apply); err != nil {
		t.Fatal(err)
	}
	if got := waitResult(t, js, "r1/1/1"); got.Outcome != bus.OutcomeWritten {
		t.Fatalf("apply result %+v; want Written", got)
	}
	app, err := apps.Get(ctx, "nfd", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get application: %v", err)
	}
	if app.Spec.Source.RepoURL != "oci://registry.example.com/aicr/charts/nfd" || app.Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue {
		t.Errorf("application %s %v", app.Spec.Source.RepoURL, app.Labels)
	}

	// The Remove's rollout runs: neither command carries an ordering token, so the applier
	// reads it to know it has not ended (Outdated otherwise).
	ro := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": "RuntimeRollout",
		"metadata": map[string]any{"name": "r2"}, "spec": map[string]any{"runtime": "cluster", "runtimeUID": "uid-it"},
	}}
	dyn := dynamic.NewForConfigOrDie(env.Config)
	if _, err := dyn.Resource(v1alpha1.RuntimeRolloutResource).Create(ctx, ro, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create rollout r2: %v", err)
	}
	remove := bus.NewRemoveCommand("cluster", "uid-it", bus.StepRef{Rollout: "r2", Index: 1, ID: "r2/1", Started: step.Started}, "nfd")
	if err := pub.Publish(ctx, bus.RemoveSubject("cluster", "nfd"), "r2/1/1", remove); err != nil {
		t.Fatal(err)
	}
	// Without Argo CD running, play its part: once the Application is deleting, drop the
	// resources finalizer.
	servicetest.Poll(t, applyTimeout, "application deleting", func() error {
		a, err := apps.Get(ctx, "nfd", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if a.DeletionTimestamp == nil {
			return fmt.Errorf("not deleting yet")
		}
		_, err = apps.Patch(ctx, "nfd", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		return err
	})
	if got := waitResult(t, js, "r2/1/1"); got.Outcome != bus.OutcomeRemoved || got.Action != v1alpha1.ActionRemove {
		t.Fatalf("remove result %+v; want Removed", got)
	}
	if _, err := apps.Get(ctx, "nfd", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("application still there after Removed: %v", err)
	}
	cancel()
	waitExit(t, exit, stderr)
}

func waitResult(t *testing.T, js jetstream.JetStream, commandID string) bus.ApplyResult {
	t.Helper()
	var got bus.ApplyResult
	servicetest.Poll(t, applyTimeout, "result of "+commandID, func() error {
		stream, err := js.Stream(t.Context(), bus.StreamEvents)
		if err != nil {
			return err
		}
		for seq := uint64(1); ; seq++ {
			msg, err := stream.GetMsg(t.Context(), seq)
			if err != nil {
				return fmt.Errorf("no result yet: %w", err)
			}
			if msg.Header.Get(jetstream.MsgIDHeader) == commandID+"/result" {
				return json.Unmarshal(msg.Data, &got)
			}
		}
	})
	return got
}
