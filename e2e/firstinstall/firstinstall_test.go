//go:build e2e

package firstinstall

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/aicr-run/aicr-operator/e2e/charttest"
	"github.com/aicr-run/aicr-operator/e2e/stack"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, testenv.Options{Kwok: true, SkipOperatorCRDs: true}))
}

// Named timeouts: helm waits for the setup Job (a hook kwok completes) and creates about 90
// objects; the Deployments become Available once kwok runs their pods.
const (
	helmTimeout      = 5 * time.Minute
	availableTimeout = 3 * time.Minute
	testTimeout      = 12 * time.Minute
)

// deferredNote is what NOTES.txt says when a value asks for an API the cluster does not serve.
const deferredNote = "Not rendered yet, their API is not served here"

var (
	certificates    = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}
	issuers         = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "issuers"}
	serviceMonitors = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}
	prometheusRules = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheusrules"}
)

func TestRecommendedValuesInstallOnAFreshClusterThenTakeTheStacksAPIs(t *testing.T) {
	env := testenv.Current(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	kc := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ns, release := charttest.Namespace, v1alpha1.ReleaseName

	// The cluster is fresh: neither API group the stack brings is served.
	groups, err := kc.Discovery().ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups.Groups {
		if g.Name == certificates.Group || g.Name == serviceMonitors.Group {
			t.Fatalf("the fresh API server already serves %s", g.Name)
		}
	}

	// Argo CD is there (docs/install.md, "Before you install"): its CRDs (testenv's) and namespace.
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "argocd"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The recommended values spread replicas over zones (DoNotSchedule), as a cloud's nodes are
	// labelled; kwok's node gets the label a real one has.
	zone := `{"metadata":{"labels":{"topology.kubernetes.io/zone":"zone-a"}}}`
	if _, err := kc.CoreV1().Nodes().Patch(ctx, env.NodeName, types.MergePatchType, []byte(zone), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	helm := charttest.Tool(t, "helm")
	home := t.TempDir()
	helmEnv := []string{"KUBECONFIG=" + env.Kubeconfig, "HELM_CACHE_HOME=" + home, "HELM_CONFIG_HOME=" + home, "HELM_DATA_HOME=" + home}
	values := filepath.Join(charttest.RepoRoot(t), "deploy", "values", "production.yaml")

	// The first install, with the recommended values, as docs/install.md writes it.
	out, err := charttest.Run(t, "", helmEnv, helm, "install", release, charttest.ChartDir(t), "--namespace", ns,
		"--create-namespace", "-f", values, "--timeout", helmTimeout.String())
	if err != nil {
		t.Fatalf("helm install with %s on a fresh cluster: %v", filepath.Base(values), err)
	}
	if !strings.Contains(out, deferredNote) || !strings.Contains(out, "certManager.enabled") || !strings.Contains(out, "metrics.serviceMonitor.enabled") {
		t.Errorf("NOTES do not say which values wait for the stack's APIs:\n%s", out)
	}
	// The setup Job issued the webhook's certificate, so the webhook writes its CA itself.
	if args := admissionArgs(ctx, t, kc, ns, release); !slices.Contains(args, "--webhook-configuration="+release) {
		t.Errorf("without cert-manager the webhook must write its CA (--webhook-configuration); args %v", args)
	}
	vwc, err := kc.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, release, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a := vwc.Annotations["cert-manager.io/inject-ca-from"]; a != "" {
		t.Errorf("the webhook configuration asks cainjector for its CA (%s) with no cert-manager", a)
	}
	// The operator's pods run (kwok): every binary's Deployment becomes Available.
	for _, b := range v1alpha1.Binaries() {
		name := v1alpha1.ServiceAccountName(b)
		err := testenv.WaitFor(ctx, availableTimeout, "Deployment "+name+" Available", func(ctx context.Context) (bool, error) {
			d, err := kc.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range d.Status.Conditions {
				if c.Type == "Available" && c.Status == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Error(err)
		}
	}

	checkTestHook(ctx, t, env, helm, helmEnv, release)

	// The second step, once the stack is up: its CRDs are served, and an upgrade renders what
	// waited for them.
	crds, err := os.ReadFile(filepath.Join("testdata", "stack-crds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.InstallCRDs(ctx, crds); err != nil {
		t.Fatal(err)
	}
	out, err = charttest.Run(t, "", helmEnv, helm, "upgrade", release, charttest.ChartDir(t), "--namespace", ns,
		"--reuse-values", "--timeout", helmTimeout.String())
	if err != nil {
		t.Fatalf("helm upgrade --reuse-values once the stack's CRDs are there: %v", err)
	}
	if strings.Contains(out, deferredNote) {
		t.Errorf("NOTES still defer values after the stack's CRDs are there:\n%s", out)
	}
	for gvr, names := range map[schema.GroupVersionResource][]string{
		certificates:    {release + "-admission", release + "-nats-ca", release + "-nats"},
		issuers:         {release + "-selfsigned", release + "-nats-ca"},
		serviceMonitors: binaryNames(release),
		prometheusRules: {release},
	} {
		for _, name := range names {
			if _, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
				t.Errorf("%s %s after the upgrade: %v", gvr.Resource, name, err)
			}
		}
	}
	if args := admissionArgs(ctx, t, kc, ns, release); slices.Contains(args, "--webhook-configuration="+release) {
		t.Errorf("with cert-manager, cainjector writes the CA, not the webhook; args %v", args)
	}
	vwc, err = kc.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, release, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a, want := vwc.Annotations["cert-manager.io/inject-ca-from"], ns+"/"+release+"-admission"; a != want {
		t.Errorf("inject-ca-from %q after the upgrade, want %q", a, want)
	}
}

func admissionArgs(ctx context.Context, t *testing.T, kc kubernetes.Interface, ns, release string) []string {
	t.Helper()
	d, err := kc.AppsV1().Deployments(ns).Get(ctx, release+"-admission", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Spec.Containers[0].Args
}

func binaryNames(release string) []string {
	var names []string
	for _, b := range v1alpha1.Binaries() {
		names = append(names, release+"-"+b)
	}
	return names
}

// checkTestHook runs the helm test hook's command as its ServiceAccount would. kwok never runs a
// container, so the test creates the hook's ServiceAccount and RBAC from helm get hooks, then runs
// kubectl-aicr with the hook Pod's args, impersonating that ServiceAccount: every check must run
// to a judgement (ok or FAIL on what kwok's cluster lacks), none refused by the API server.
func checkTestHook(ctx context.Context, t *testing.T, env *testenv.Env, helm string, helmEnv []string, release string) {
	t.Helper()
	ns := charttest.Namespace
	out, err := charttest.Run(t, "", helmEnv, helm, "get", "hooks", release, "--namespace", ns)
	if err != nil {
		t.Fatalf("helm get hooks: %v", err)
	}
	dyn := dynamic.NewForConfigOrDie(env.Config)
	var pod *unstructured.Unstructured
	for _, o := range charttest.Decode(t, out) {
		if o.GetAnnotations()["helm.sh/hook"] != "test" {
			continue
		}
		if o.GetKind() == "Pod" {
			pod = o
			continue
		}
		gv, err := schema.ParseGroupVersion(o.GetAPIVersion())
		if err != nil {
			t.Fatal(err)
		}
		res := dyn.Resource(gv.WithResource(strings.ToLower(o.GetKind()) + "s"))
		var ri dynamic.ResourceInterface = res
		if o.GetNamespace() != "" {
			ri = res.Namespace(o.GetNamespace())
		}
		if _, err := ri.Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create the test hook's %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	if pod == nil {
		t.Fatal("helm get hooks shows no Pod with helm.sh/hook: test")
	}
	containers, _, _ := unstructured.NestedSlice(pod.Object, "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("the test hook Pod has %d containers, want 1", len(containers))
	}
	c := containers[0].(map[string]any)
	if img, _ := c["image"].(string); !strings.Contains(img, "/kubectl-aicr") {
		t.Errorf("the test hook runs image %q, want the kubectl-aicr image", img)
	}
	var args []string
	for _, a := range c["args"].([]any) {
		args = append(args, a.(string))
	}
	sa, _, _ := unstructured.NestedString(pod.Object, "spec", "serviceAccountName")
	args = append(args, "-o", "json", "--kubeconfig", env.Kubeconfig, "--as", "system:serviceaccount:"+ns+":"+sa)
	stdout, err := charttest.Run(t, "", nil, pluginBinary(t), args...)
	var exit *exec.ExitError
	if err != nil && (!errors.As(err, &exit) || exit.ExitCode() < 3) {
		t.Fatalf("kubectl-aicr %v (the test hook's command): %v\n%s", args, err, stdout)
	}
	var list struct {
		Items []struct{ Name, State, Message string }
	}
	if err := json.Unmarshal([]byte(stdout), &list); err != nil {
		t.Fatalf("kubectl aicr check -o json: %v\n%s", err, stdout)
	}
	if len(list.Items) != 7 {
		t.Errorf("the test hook ran %d checks, want 7: %s", len(list.Items), stdout)
	}
	for _, r := range list.Items {
		t.Logf("test hook: %-10s %-7s %s", r.Name, r.State, r.Message)
		if strings.Contains(strings.ToLower(r.Message), "forbidden") {
			t.Errorf("the test hook's ServiceAccount may not do what check %s needs: %s", r.Name, r.Message)
		}
	}
}

// pluginBinary is kubectl-aicr from AICR_BIN_DIR, else built into a temporary folder.
func pluginBinary(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv(stack.EnvBinDir); dir != "" {
		return filepath.Join(dir, "kubectl-aicr")
	}
	bin := filepath.Join(t.TempDir(), "kubectl-aicr")
	if out, err := charttest.Run(t, charttest.RepoRoot(t), nil, "go", "build", "-o", bin, "./cli/cmd/kubectl-aicr"); err != nil {
		t.Fatalf("go build kubectl-aicr: %v\n%s", err, out)
	}
	return bin
}
