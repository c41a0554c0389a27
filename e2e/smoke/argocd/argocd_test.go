//go:build e2e

package argocd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// Named timeouts. Argo CD syncs the chart in about 5 s on an idle machine; the rest is headroom
// for a loaded one.
const (
	applicationSyncedTimeout = 3 * time.Minute
	testTimeout              = 5 * time.Minute
)

// smokeChart is the chart the test pushes (relative to this package's folder).
var smokeChart = filepath.Join("..", "..", "testdata", "charts", "smoke")

// registryAuth are the credentials the registry demands; Argo CD gets them from the repository
// Secret.
var registryAuth = &testenv.BasicAuth{Username: "pusher", Password: "smoke-test-password"}

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, testenv.Options{
		Kwok:         true,
		ArgoCD:       true,
		Registry:     true,
		RegistryAuth: registryAuth,
	}))
}

// A pushed chart is in the registry under the digest PushChart reports, and only for a client
// with the credentials.
func TestPushedChartIsServedByDigest(t *testing.T) {
	env := testenv.Current(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	chart, err := env.PushChart(ctx, smokeChart, "pinned")
	if err != nil {
		t.Fatal(err)
	}
	manifest := func(auth *testenv.BasicAuth) *http.Response {
		t.Helper()
		url := "http://" + env.Registry.Host + "/v2/pinned/" + chart.Name + "/manifests/" + chart.Version
		req, err := http.NewRequestWithContext(ctx, http.MethodHead, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json")
		if auth != nil {
			req.SetBasicAuth(auth.Username, auth.Password)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp
	}
	if resp := manifest(nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("manifest without credentials: status %d, want 401", resp.StatusCode)
	}
	resp := manifest(registryAuth)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("manifest with credentials: status %d, want 200", resp.StatusCode)
	}
	if got := resp.Header.Get("Docker-Content-Digest"); got != chart.Digest {
		t.Errorf("registry digest %s, PushChart reported %s", got, chart.Digest)
	}
}

// A real Argo CD v3.4.2 syncs a Helm chart pinned by digest from the local OCI registry: the
// Application reaches Synced, Healthy and operation phase Succeeded at exactly that digest, and
// the chart's objects (with its post-install hook) exist in the cluster.
func TestHelmChartFromOCIRegistrySyncs(t *testing.T) {
	env := testenv.Current(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()

	chart, err := env.PushChart(ctx, smokeChart, "charts")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pushed %s:%s as %s", chart.Repo, chart.Version, chart.Digest)
	if err := env.CreateOCIRepoSecret(ctx, "smoke-chart", chart.Repo); err != nil {
		t.Fatal(err)
	}

	apps := dynamic.NewForConfigOrDie(env.Config).Resource(testenv.ApplicationGVR).Namespace(testenv.ArgoCDNamespace)
	app := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Application",
		"metadata":   map[string]any{"name": "smoke", "namespace": testenv.ArgoCDNamespace},
		"spec": map[string]any{
			"project": "default",
			"source": map[string]any{
				"repoURL":        chart.Repo,
				"path":           ".",
				"targetRevision": chart.Digest,
			},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "smoke"},
			"syncPolicy": map[string]any{
				"automated":   map[string]any{"prune": true, "selfHeal": true},
				"syncOptions": []any{"CreateNamespace=true"},
			},
		},
	}}
	if _, err := apps.Create(ctx, app, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create application: %v", err)
	}
	created := time.Now()

	var last map[string]any
	err = testenv.WaitFor(ctx, applicationSyncedTimeout, "application smoke synced, healthy and succeeded", func(ctx context.Context) (bool, error) {
		got, err := apps.Get(ctx, "smoke", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last, _, _ = unstructured.NestedMap(got.Object, "status")
		sync, _, _ := unstructured.NestedString(got.Object, "status", "sync", "status")
		revision, _, _ := unstructured.NestedString(got.Object, "status", "sync", "revision")
		health, _, _ := unstructured.NestedString(got.Object, "status", "health", "status")
		phase, _, _ := unstructured.NestedString(got.Object, "status", "operationState", "phase")
		// health can be Healthy before the operation (with its PostSync hook) has Succeeded
		if sync == "Synced" && health == "Healthy" && phase == "Succeeded" && revision == chart.Digest {
			return true, nil
		}
		return false, fmt.Errorf("sync %q at %q, health %q, operation %q", sync, revision, health, phase)
	})
	if err != nil {
		status, _ := json.MarshalIndent(last, "", "  ")
		t.Fatalf("%v\nlast status: %s\napplication-controller log: %s\nrepo-server log: %s",
			err, status, env.LogPath(testenv.ProcAppController), env.LogPath(testenv.ProcRepoServer))
	}
	t.Logf("application Synced/Healthy/Succeeded at the digest %s after creation", time.Since(created).Round(100*time.Millisecond))

	cs := kubernetes.NewForConfigOrDie(env.Config)
	cm, err := cs.CoreV1().ConfigMaps("smoke").Get(ctx, "smoke-config", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("chart's configmap: %v", err)
	}
	if cm.Data["greeting"] != "hello from the smoke chart" {
		t.Errorf("configmap greeting = %q, want the chart's value", cm.Data["greeting"])
	}
	d, err := cs.AppsV1().Deployments("smoke").Get(ctx, "smoke-web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("chart's deployment: %v", err)
	}
	if !hasCondition(d.Status.Conditions, appsv1.DeploymentAvailable) || d.Status.AvailableReplicas != 2 {
		t.Errorf("deployment smoke-web: %d available, conditions %v; want 2 and Available", d.Status.AvailableReplicas, d.Status.Conditions)
	}
	job, err := cs.BatchV1().Jobs("smoke").Get(ctx, "smoke-post-install", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("chart's post-install hook job: %v", err)
	}
	if !jobComplete(job) {
		t.Errorf("hook job smoke-post-install not complete: %+v", job.Status)
	}
}

func hasCondition(conds []appsv1.DeploymentCondition, t appsv1.DeploymentConditionType) bool {
	for _, c := range conds {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func jobComplete(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
