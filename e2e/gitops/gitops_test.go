//go:build e2e

package gitops

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// Named timeouts: Argo CD syncs the chart (about 70 objects and the setup hook) in well under a
// minute on an idle machine; the rest is headroom for a loaded one.
const (
	syncedTimeout  = 5 * time.Minute
	refreshTimeout = 2 * time.Minute
	testTimeout    = 10 * time.Minute
	releaseNS      = "aicr-system"
	appName        = "aicr-operator"
)

// chartDir is the operator's chart, found above this package's folder.
func chartDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		p := filepath.Join(dir, "deploy", "charts", "aicr-operator")
		if _, err := os.Stat(filepath.Join(p, "Chart.yaml")); err == nil {
			return p
		}
		if parent := filepath.Dir(dir); parent != dir {
			dir = parent
			continue
		}
		t.Fatal("deploy/charts/aicr-operator not found above the working directory")
	}
}

type status struct {
	sync, revision, health, phase, finishedAt, reconciledAt string
	history                                                 int
	refreshPending                                          bool
	raw                                                     map[string]any
}

func read(ctx context.Context, apps dynamic.ResourceInterface) (status, error) {
	got, err := apps.Get(ctx, appName, metav1.GetOptions{})
	if err != nil {
		return status{}, err
	}
	var s status
	s.raw, _, _ = unstructured.NestedMap(got.Object, "status")
	s.sync, _, _ = unstructured.NestedString(got.Object, "status", "sync", "status")
	s.revision, _, _ = unstructured.NestedString(got.Object, "status", "sync", "revision")
	s.health, _, _ = unstructured.NestedString(got.Object, "status", "health", "status")
	s.phase, _, _ = unstructured.NestedString(got.Object, "status", "operationState", "phase")
	s.finishedAt, _, _ = unstructured.NestedString(got.Object, "status", "operationState", "finishedAt")
	s.reconciledAt, _, _ = unstructured.NestedString(got.Object, "status", "reconciledAt")
	h, _, _ := unstructured.NestedSlice(got.Object, "status", "history")
	s.history = len(h)
	_, s.refreshPending = got.GetAnnotations()["argocd.argoproj.io/refresh"]
	return s, nil
}

// TestChartInstallsWithArgoCDAndStaysSynced installs the chart from the local registry with one
// Application (automated sync, self-heal), as docs/install.md's "with Argo CD" section does, waits
// for Synced and Healthy at the pushed digest, then forces a hard refresh (Argo CD renders the
// chart again with helm template) and requires the comparison to find it still Synced with no new
// sync: had any rendered value changed between renders (a generated password, a bcrypt salt, a
// CA), the refresh would find the Application OutOfSync and self-heal would sync it again.
func TestChartInstallsWithArgoCDAndStaysSynced(t *testing.T) {
	env := testenv.Current(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	chart, err := env.PushChart(ctx, chartDir(t), "charts")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.CreateOCIRepoSecret(ctx, "aicr-operator-chart", chart.Repo); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(env.Config)
	apps := dyn.Resource(testenv.ApplicationGVR).Namespace(testenv.ArgoCDNamespace)
	app := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": appName, "namespace": testenv.ArgoCDNamespace},
		"spec": map[string]any{
			"project": "default",
			"source": map[string]any{
				"repoURL": chart.Repo, "path": ".", "targetRevision": chart.Digest,
				"helm": map[string]any{
					"releaseName": appName,
					"valuesObject": map[string]any{
						"registry": map[string]any{"repository": "registry.example.com/aicr"},
						// kwok's cluster has no storage provisioner.
						"nats":                map[string]any{"jetstream": map[string]any{"storage": map[string]any{"persistent": false}}},
						"networkPolicy":       map[string]any{"enabled": true},
						"podDisruptionBudget": map[string]any{"enabled": true},
					},
				},
			},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": releaseNS},
			"syncPolicy": map[string]any{
				"automated":   map[string]any{"prune": true, "selfHeal": true},
				"syncOptions": []any{"CreateNamespace=true"},
			},
		},
	}}
	if _, err := apps.Create(ctx, app, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the Application: %v", err)
	}
	fail := func(err error, last status) {
		t.Helper()
		raw, _ := json.MarshalIndent(last.raw, "", "  ")
		t.Fatalf("%v\nlast status: %s\napplication-controller log: %s\nrepo-server log: %s", err, raw,
			env.LogPath(testenv.ProcAppController), env.LogPath(testenv.ProcRepoServer))
	}

	var synced status
	err = testenv.WaitFor(ctx, syncedTimeout, "the operator's Application Synced, Healthy and Succeeded", func(ctx context.Context) (bool, error) {
		s, err := read(ctx, apps)
		synced = s
		if err != nil {
			return false, err
		}
		if s.sync == "Synced" && s.health == "Healthy" && s.phase == "Succeeded" && s.revision == chart.Digest {
			return true, nil
		}
		return false, fmt.Errorf("sync %q at %q, health %q, operation %q", s.sync, s.revision, s.health, s.phase)
	})
	if err != nil {
		fail(err, synced)
	}

	// What Argo CD installed is the chart: the binaries, NATS, the webhook, the setup hook's
	// RBAC (the Job itself is deleted once it succeeded).
	kc := kubernetes.NewForConfigOrDie(env.Config)
	for _, d := range []string{"planner", "applier", "readiness", "credrefresher", "admission"} {
		if _, err := kc.AppsV1().Deployments(releaseNS).Get(ctx, appName+"-"+d, metav1.GetOptions{}); err != nil {
			t.Errorf("Deployment %s-%s: %v", appName, d, err)
		}
	}
	if _, err := kc.AppsV1().StatefulSets(releaseNS).Get(ctx, appName+"-nats", metav1.GetOptions{}); err != nil {
		t.Errorf("the NATS StatefulSet: %v", err)
	}
	if _, err := kc.CoreV1().ServiceAccounts(releaseNS).Get(ctx, appName+"-setup", metav1.GetOptions{}); err != nil {
		t.Errorf("the setup hook's ServiceAccount: %v", err)
	}

	// A hard refresh: Argo CD renders the chart again and compares.
	patch := []byte(`{"metadata":{"annotations":{"argocd.argoproj.io/refresh":"hard"}}}`)
	if _, err := apps.Patch(ctx, appName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("request a hard refresh: %v", err)
	}
	var after status
	err = testenv.WaitFor(ctx, refreshTimeout, "the hard refresh done", func(ctx context.Context) (bool, error) {
		s, err := read(ctx, apps)
		after = s
		if err != nil {
			return false, err
		}
		return !s.refreshPending && s.reconciledAt != synced.reconciledAt, nil
	})
	if err != nil {
		fail(err, after)
	}
	if after.sync != "Synced" || after.revision != chart.Digest || after.history != synced.history || after.finishedAt != synced.finishedAt {
		fail(fmt.Errorf("after the hard refresh: sync %q at %q, %d syncs in the history (%d before), last operation finished %s (%s before); want Synced with no new sync",
			after.sync, after.revision, after.history, synced.history, after.finishedAt, synced.finishedAt), after)
	}
}
