//go:build integration

package deploy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/aicr-run/aicr-operator/e2e/charttest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/plan"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, testenv.Options{}))
}

const (
	releaseNamespace = charttest.Namespace
	engineNamespace  = "argocd"
	kubeVersion      = charttest.KubeVersion
	applyTimeout     = 2 * time.Minute
)

// binaries are the operator's binaries: the chart must deploy each under the names the code
// uses for it (v1alpha1's identities).
var binaries = v1alpha1.Binaries()

func containerArgs(t testing.TB, objs []*unstructured.Unstructured, binary string) []string {
	t.Helper()
	d := charttest.Find(objs, "Deployment", v1alpha1.ServiceAccountName(binary))
	if d == nil {
		t.Fatalf("no Deployment %s", v1alpha1.ServiceAccountName(binary))
	}
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
	return args
}

func rules(t testing.TB, o *unstructured.Unstructured) []map[string]any {
	t.Helper()
	rs, _, _ := unstructured.NestedSlice(o.Object, "rules")
	out := make([]map[string]any, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.(map[string]any))
	}
	return out
}

func TestChartLint(t *testing.T) {
	helm := charttest.Tool(t, "helm")
	for name, set := range map[string][]string{
		"defaults with a repository":        {"registry.repository=registry.example.com/aicr"},
		"aws, clustered NATS, cert-manager": {"registry.repository=123456789012.dkr.ecr.us-east-1.amazonaws.com/aicr", "registry.auth.mode=aws", "nats.replicas=3", "certManager.enabled=true"},
	} {
		t.Run(name, func(t *testing.T) {
			args := []string{"lint", charttest.ChartDir(t), "--strict", "--kube-version", kubeVersion}
			for _, s := range set {
				args = append(args, "--set", s)
			}
			if out, err := charttest.Run(t, "", nil, helm, args...); err != nil {
				t.Fatalf("helm lint: %v\n%s", err, out)
			}
		})
	}
}

// What the chart renders for each way of configuring it.
func TestChartTemplates(t *testing.T) {
	t.Run("static credentials by default: no Secret, credrefresher only reads it", func(t *testing.T) {
		objs := charttest.MustRender(t)
		if s := charttest.Find(objs, "Secret", "aicr-registry"); s != nil {
			t.Errorf("static mode rendered the repo-creds Secret; the admin owns it")
		}
		role := charttest.Find(objs, "Role", "aicr-operator-credrefresher")
		if got := rules(t, role)[0]["verbs"]; !equalJSON(got, []any{"get"}) {
			t.Errorf("credrefresher verbs on the Secret = %v, want [get]", got)
		}
		if args := containerArgs(t, objs, "credrefresher"); !slices.Contains(args, "--registry-auth=static") {
			t.Errorf("credrefresher args %v lack --registry-auth=static", args)
		}
	})
	t.Run("registry.auth as a plain string aws: the chart creates the Secret, kept on uninstall", func(t *testing.T) {
		objs := charttest.MustRender(t, "registry.auth=aws")
		s := charttest.Find(objs, "Secret", "aicr-registry")
		if s == nil {
			t.Fatal("aws mode did not render the repo-creds Secret")
		}
		if s.GetNamespace() != engineNamespace || s.GetLabels()["argocd.argoproj.io/secret-type"] != "repo-creds" || s.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
			t.Errorf("repo-creds Secret metadata = %v %v in %s", s.GetLabels(), s.GetAnnotations(), s.GetNamespace())
		}
		data, _, _ := unstructured.NestedStringMap(s.Object, "stringData")
		if diff := cmpDiff(map[string]string{"type": "oci", "url": "oci://registry.example.com/aicr", "username": "AWS"}, data); diff != "" {
			t.Errorf("repo-creds Secret data (-want +got), never a password:\n%s", diff)
		}
		role := charttest.Find(objs, "Role", "aicr-operator-credrefresher")
		if got := rules(t, role)[0]["verbs"]; !equalJSON(got, []any{"get", "update"}) {
			t.Errorf("credrefresher verbs on the Secret = %v, want [get update]", got)
		}
	})
	t.Run("registry.auth as a mapping: secret name and region", func(t *testing.T) {
		objs := charttest.MustRender(t, "registry.auth.mode=aws", "registry.auth.repoCredsSecret=ecr-creds", "registry.auth.aws.region=eu-west-1")
		if charttest.Find(objs, "Secret", "ecr-creds") == nil {
			t.Error("no Secret ecr-creds")
		}
		args := containerArgs(t, objs, "credrefresher")
		for _, want := range []string{"--repo-creds-secret=ecr-creds", "--aws-region=eu-west-1", "--registry-auth=aws"} {
			if !slices.Contains(args, want) {
				t.Errorf("credrefresher args %v lack %s", args, want)
			}
		}
	})
	t.Run("AppProject: sources under the repository only, component namespaces only, kept", func(t *testing.T) {
		objs := charttest.MustRender(t, "registry.repository=oci://reg.example.com/x/", "componentNamespaces={a,b}")
		p := charttest.Find(objs, "AppProject", "aicr")
		if p == nil {
			t.Fatal("no AppProject aicr")
		}
		repos, _, _ := unstructured.NestedStringSlice(p.Object, "spec", "sourceRepos")
		if diff := cmpDiff([]string{"oci://reg.example.com/x/charts/*", "oci://reg.example.com/x/wrappers/*"}, repos); diff != "" {
			t.Errorf("sourceRepos (-want +got):\n%s", diff)
		}
		dests, _, _ := unstructured.NestedSlice(p.Object, "spec", "destinations")
		want := []any{
			map[string]any{"server": "https://kubernetes.default.svc", "namespace": "a"},
			map[string]any{"server": "https://kubernetes.default.svc", "namespace": "b"},
		}
		if !equalJSON(dests, want) {
			t.Errorf("destinations = %v, want %v", dests, want)
		}
		if p.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
			t.Error("AppProject is not kept on uninstall")
		}
		for _, ns := range []string{"a", "b"} {
			n := charttest.Find(objs, "Namespace", ns)
			if n == nil || n.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
				t.Errorf("component namespace %s missing or not kept: %v", ns, n)
			}
		}
	})
	t.Run("clustered NATS: routes to every server, streams replicated 3 ways", func(t *testing.T) {
		objs := charttest.MustRender(t, "nats.replicas=3")
		sts := charttest.Find(objs, "StatefulSet", "aicr-operator-nats")
		if n, _, _ := unstructured.NestedFieldNoCopy(sts.Object, "spec", "replicas"); fmt.Sprint(n) != "3" {
			t.Errorf("NATS replicas = %v, want 3", n)
		}
		cs, _, _ := unstructured.NestedSlice(sts.Object, "spec", "template", "spec", "containers")
		natsArgs, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
		routes := ""
		for _, a := range natsArgs {
			if r, ok := strings.CutPrefix(a, "--routes="); ok {
				routes = r
			}
		}
		// The route password is the environment's, expanded by Kubernetes: never in the manifest.
		if got := strings.Count(routes, "nats-route://route:$(ROUTE_PASSWORD)@aicr-operator-nats-"); got != 3 {
			t.Errorf("the NATS server's --routes has %d routes, want 3: %q", got, routes)
		}
		if conf := charttest.NATSConf(t, objs); !strings.Contains(conf, "password: $ROUTE_PASSWORD") {
			t.Errorf("the cluster block does not read the route password from the environment:\n%s", conf)
		}
		for _, b := range binaries {
			if args := containerArgs(t, objs, b); !slices.Contains(args, "--stream-replicas=3") {
				t.Errorf("%s args %v lack --stream-replicas=3", b, args)
			}
		}
	})
	t.Run("cert-manager issues the webhook certificate and injects the CA", func(t *testing.T) {
		objs := charttest.MustRender(t, "certManager.enabled=true")
		if charttest.Find(objs, "Certificate", "aicr-operator-admission") == nil || charttest.Find(objs, "Issuer", "aicr-operator-selfsigned") == nil {
			t.Error("no Certificate and Issuer")
		}
		if charttest.Find(objs, "Secret", "aicr-operator-admission-tls") != nil || charttest.SetupJobArgs(t, objs)["webhook-tls-secret"] != "" {
			t.Error("the chart or its setup Job generates a certificate although cert-manager issues it")
		}
		if args := containerArgs(t, objs, "admission"); slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--webhook-configuration") }) {
			t.Errorf("admission injects the CA although cainjector does: %v", args)
		}
		vwc := charttest.Find(objs, "ValidatingWebhookConfiguration", "aicr-operator")
		if vwc.GetAnnotations()["cert-manager.io/inject-ca-from"] != releaseNamespace+"/aicr-operator-admission" {
			t.Errorf("webhook annotations = %v", vwc.GetAnnotations())
		}
	})
	t.Run("each binary runs as its ServiceAccount, with its NATS user and the operator's identities", func(t *testing.T) {
		objs := charttest.MustRender(t)
		identities := "--operator-identities=" + strings.Join(v1alpha1.OperatorIdentities(releaseNamespace), ",")
		for _, b := range binaries {
			d := charttest.Find(objs, "Deployment", v1alpha1.ServiceAccountName(b))
			if d == nil {
				t.Errorf("no Deployment %s", v1alpha1.ServiceAccountName(b))
				continue
			}
			if sa, _, _ := unstructured.NestedString(d.Object, "spec", "template", "spec", "serviceAccountName"); sa != v1alpha1.ServiceAccountName(b) {
				t.Errorf("%s runs as ServiceAccount %q, want %q", b, sa, v1alpha1.ServiceAccountName(b))
			}
			args := containerArgs(t, objs, b)
			if !slices.Contains(args, "--nats-user="+b) {
				t.Errorf("%s args %v lack --nats-user=%s", b, args, b)
			}
			if wantIDs := b == v1alpha1.BinaryPlanner || b == v1alpha1.BinaryAdmission; wantIDs != slices.Contains(args, identities) {
				t.Errorf("%s args %v: %s present = %v, want %v", b, args, identities, !wantIDs, wantIDs)
			}
		}
	})
	t.Run("the operator's own writes fail closed", func(t *testing.T) {
		objs := charttest.MustRender(t, "admission.failurePolicy=Ignore")
		vwc := charttest.Find(objs, "ValidatingWebhookConfiguration", "aicr-operator")
		hooks, _, _ := unstructured.NestedSlice(vwc.Object, "webhooks")
		for _, h := range hooks {
			h := h.(map[string]any)
			name, policy := h["name"].(string), h["failurePolicy"]
			if strings.HasPrefix(name, "operator-applications.") || strings.HasPrefix(name, "plans.") {
				if policy != "Fail" {
					t.Errorf("webhook %s failurePolicy = %v, want Fail", name, policy)
				}
			}
		}
	})
	t.Run("every container runs non-root, read-only, without privileges", func(t *testing.T) {
		objs := charttest.MustRender(t)
		want := map[string]any{
			"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "runAsNonRoot": true,
			"capabilities": map[string]any{"drop": []any{"ALL"}}, "seccompProfile": map[string]any{"type": "RuntimeDefault"},
		}
		for _, o := range objs {
			if o.GetKind() != "Deployment" && o.GetKind() != "StatefulSet" {
				continue
			}
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range cs {
				sc := c.(map[string]any)["securityContext"]
				if !equalJSON(sc, want) {
					t.Errorf("%s %s: securityContext %v", o.GetKind(), o.GetName(), sc)
				}
			}
		}
	})
	t.Run("engine.manageCustomizations is accepted and ignored", func(t *testing.T) {
		a, b := charttest.MustRender(t, "engine.manageCustomizations=true"), charttest.MustRender(t)
		if len(a) != len(b) {
			t.Errorf("manageCustomizations changed what is rendered: %d objects, want %d", len(a), len(b))
		}
	})

	for name, tc := range map[string]struct {
		set  []string
		want string
	}{
		"without registry.repository the chart says what to set": {nil, "registry.repository is required"},
		"an unknown registry.auth is refused":                    {[]string{"registry.repository=r.example.com/a", "registry.auth=gcp"}, "registry/auth"},
		"two NATS servers cannot form a quorum":                  {[]string{"registry.repository=r.example.com/a", "nats.replicas=2"}, "nats/replicas"},
		"a misspelt value is refused":                            {[]string{"registry.repository=r.example.com/a", "engine.namspace=x"}, "namspace"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := charttest.Render(t, "aicr-operator", releaseNamespace, tc.set...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("helm template error = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// Every flag the chart passes is one the binary defines (in its internal/app or the common
// options of servicekit/service), so no Deployment dies on an unknown flag.
func TestChartFlagsAreTheBinariesFlags(t *testing.T) {
	root := charttest.RepoRoot(t)
	objs := charttest.MustRender(t, "registry.auth.mode=aws", "registry.auth.aws.region=us-east-1")
	common, err := os.ReadFile(filepath.Join(root, "servicekit", "service", "options.go"))
	if err != nil {
		t.Fatal(err)
	}
	flagRE := regexp.MustCompile(`^--([a-z0-9-]+)`)
	for _, b := range binaries {
		t.Run(b, func(t *testing.T) {
			files, err := filepath.Glob(filepath.Join(root, b, "internal", "app", "*.go"))
			if err != nil || len(files) == 0 {
				t.Fatalf("%s/internal/app holds no Go files (%v): the flags the chart passes %s cannot be checked", b, err, b)
			}
			src := string(common)
			for _, f := range files {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				src += string(data)
			}
			for _, a := range containerArgs(t, objs, b) {
				m := flagRE.FindStringSubmatch(a)
				if m == nil {
					t.Errorf("argument %q is not a --flag", a)
					continue
				}
				if !strings.Contains(src, `"`+m[1]+`"`) {
					t.Errorf("the chart passes --%s, which %s does not define", m[1], b)
				}
			}
		})
	}
}

// The rendered chart is accepted by a real kube-apiserver (server-side apply, dry run).
func TestChartAppliesToAPIServer(t *testing.T) {
	env := testenv.Current(t)
	ctx, cancel := context.WithTimeout(context.Background(), applyTimeout)
	defer cancel()
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ensureNamespaces(ctx, t, kc, releaseNamespace, engineNamespace)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(env.Config)))

	for name, set := range map[string][]string{
		"static credentials, one NATS server": nil,
		"aws credentials, NATS cluster":       {"registry.auth=aws", "nats.replicas=3", "bundleNamespaces={bundles}"},
		"network policies, PDBs, spread, the dashboard": {"registry.auth=aws", "networkPolicy.enabled=true", "planner.replicas=2",
			"networkPolicy.apiServerCIDRs={10.96.0.1/32}", "networkPolicy.metricsFrom[0].podSelector.matchLabels.app=prometheus",
			"metrics.grafanaDashboard.enabled=true"},
	} {
		t.Run(name, func(t *testing.T) {
			if slices.Contains(set, "bundleNamespaces={bundles}") {
				ensureNamespaces(ctx, t, kc, "bundles")
			}
			for _, o := range charttest.MustRender(t, set...) {
				// The helm test hook's Pod names a ServiceAccount a dry run never creates;
				// e2e/firstinstall creates the hook's objects and runs its command.
				if o.GetKind() == "Pod" && o.GetAnnotations()["helm.sh/hook"] == "test" {
					continue
				}
				apply(ctx, t, dyn, mapper, o, true)
			}
		})
	}
}

// Each binary's identity may do what it needs and nothing on the forbidden list, under the
// chart's own RBAC (applied for real; checked with SubjectAccessReviews and real requests).
func TestChartRBAC(t *testing.T) {
	env := testenv.Current(t)
	ctx, cancel := context.WithTimeout(context.Background(), applyTimeout)
	defer cancel()
	kc := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(env.Config)))
	const staticNamespace = "aicr-static"
	ensureNamespaces(ctx, t, kc, releaseNamespace, engineNamespace, staticNamespace)

	rbacKinds := []string{"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
	applyRBAC := func(objs []*unstructured.Unstructured) {
		for _, o := range objs {
			if slices.Contains(rbacKinds, o.GetKind()) {
				apply(ctx, t, dyn, mapper, o, false)
			}
		}
	}
	applyRBAC(charttest.MustRender(t, "registry.auth=aws"))
	staticObjs, err := charttest.Render(t, "static-aicr-operator", staticNamespace, "registry.repository=registry.example.com/aicr", "engine.project=aicr-static")
	if err != nil {
		t.Fatal(err)
	}
	applyRBAC(staticObjs)

	type check struct {
		verb, group, resource, sub, ns, name string
	}
	ops := releaseNamespace
	allowed := map[string][]check{
		"planner": {
			{"watch", "operator.aicr.run", "clusterruntimes", "", "", ""},
			{"update", "operator.aicr.run", "clusterruntimes", "status", "", "cluster"},
			{"update", "operator.aicr.run", "clusterruntimes", "", "", "cluster"},
			{"create", "operator.aicr.run", "runtimerollouts", "", "", ""},
			{"update", "operator.aicr.run", "runtimerollouts", "status", "", "r-1"},
			{"create", "", "configmaps", "", ops, ""},
			{"list", "", "configmaps", "", ops, ""},
			// Plans nothing refers to (spec.rollout.historyLimit); the chart's admission policy
			// denies the delete of any other ConfigMap (TestPlannerDeletesOnlyPlans).
			{"delete", "", "configmaps", "", ops, "aicr-plan-x"},
			{"create", "coordination.k8s.io", "leases", "", ops, ""},
			{"update", "coordination.k8s.io", "leases", "", ops, v1alpha1.LeaseName(v1alpha1.BinaryPlanner)},
			// Events about the cluster-scoped ClusterRuntime and RuntimeRollouts live in the
			// operator namespace; the recorder patches the count of a repeated one.
			{"create", "", "events", "", ops, ""},
			{"patch", "", "events", "", ops, ""},
			// The informer of owned Applications the drift checks read; it writes none.
			{"list", "argoproj.io", "applications", "", engineNamespace, ""},
			{"watch", "argoproj.io", "applications", "", engineNamespace, ""},
		},
		"applier": {
			{"get", "argoproj.io", "applications", "", engineNamespace, "gpu-operator"},
			{"create", "argoproj.io", "applications", "", engineNamespace, ""},
			{"patch", "argoproj.io", "applications", "", engineNamespace, "gpu-operator"},
			{"delete", "argoproj.io", "applications", "", engineNamespace, "gpu-operator"},
			{"get", "", "configmaps", "", ops, "aicr-plan-x"},
			{"get", "operator.aicr.run", "runtimerollouts", "", "", "r-1"},
		},
		"readiness": {
			{"list", "argoproj.io", "applications", "", engineNamespace, ""},
			{"watch", "argoproj.io", "applications", "", engineNamespace, ""},
			{"get", "argoproj.io", "appprojects", "", engineNamespace, "aicr"},
			{"get", "", "configmaps", "", ops, "aicr-plan-x"},
			{"update", "coordination.k8s.io", "leases", "", ops, v1alpha1.LeaseName(v1alpha1.BinaryReadiness)},
			// The rollout an Application's delete-rollout marker names.
			{"get", "operator.aicr.run", "runtimerollouts", "", "", "r-1"},
		},
		"credrefresher": {
			{"get", "", "secrets", "", engineNamespace, "aicr-registry"},
			{"update", "", "secrets", "", engineNamespace, "aicr-registry"},
			{"update", "coordination.k8s.io", "leases", "", ops, v1alpha1.LeaseName(v1alpha1.BinaryCredRefresher)},
		},
		"admission": {
			{"get", "", "configmaps", "", ops, "gpu-stack"},
			// The rollout an Application's delete-rollout marker names.
			{"get", "operator.aicr.run", "runtimerollouts", "", "", "r-1"},
		},
	}
	denied := map[string][]check{
		"planner": {
			{"patch", "argoproj.io", "applications", "", engineNamespace, "gpu-operator"},
			{"get", "argoproj.io", "applications", "", engineNamespace, "gpu-operator"},
			{"update", "coordination.k8s.io", "leases", "", ops, v1alpha1.LeaseName(v1alpha1.BinaryReadiness)},
			{"create", "", "configmaps", "", engineNamespace, ""},
			{"delete", "operator.aicr.run", "clusterruntimes", "", "", "cluster"},
			// Plans are immutable, and bundles are the user's.
			{"update", "", "configmaps", "", ops, "gpu-stack"},
			{"delete", "", "configmaps", "", engineNamespace, "argocd-cm"},
			// Its Events live in the operator namespace, nowhere else.
			{"create", "", "events", "", "default", ""},
		},
		"applier": {
			{"update", "argoproj.io", "applications", "", engineNamespace, "gpu-operator"},
			{"patch", "argoproj.io", "applications", "", "default", "x"},
			{"update", "operator.aicr.run", "runtimerollouts", "", "", "r-1"},
			{"list", "operator.aicr.run", "runtimerollouts", "", "", ""},
			{"create", "", "configmaps", "", ops, ""},
			{"get", "argoproj.io", "appprojects", "", engineNamespace, "aicr"},
		},
		"readiness": {
			{"patch", "argoproj.io", "applications", "", engineNamespace, "gpu-operator"},
			{"get", "argoproj.io", "appprojects", "", engineNamespace, "default"},
			{"update", "argoproj.io", "appprojects", "", engineNamespace, "aicr"},
			{"create", "", "configmaps", "", ops, ""},
			{"list", "operator.aicr.run", "runtimerollouts", "", "", ""},
			{"update", "operator.aicr.run", "runtimerollouts", "", "", "r-1"},
		},
		"credrefresher": {
			{"create", "", "secrets", "", engineNamespace, ""},
			{"get", "", "secrets", "", engineNamespace, "argocd-secret"},
			{"delete", "", "secrets", "", engineNamespace, "aicr-registry"},
		},
		"admission": {
			{"update", "operator.aicr.run", "runtimerollouts", "", "", "r-1"},
			{"list", "operator.aicr.run", "runtimerollouts", "", "", ""},
			{"create", "", "configmaps", "", ops, ""},
			{"list", "", "configmaps", "", ops, ""},
		},
	}
	// What no binary may do (docs/install.md, "Privileges"), for every binary.
	for _, b := range binaries {
		for _, ns := range []string{"", ops, engineNamespace} {
			denied[b] = append(denied[b],
				check{"list", "", "secrets", "", ns, ""},
				check{"watch", "", "secrets", "", ns, ""},
				check{"create", "", "pods", "", ns, ""},
			)
		}
		denied[b] = append(denied[b],
			check{"get", "", "configmaps", "", engineNamespace, "argocd-cm"},
			check{"update", "", "configmaps", "", engineNamespace, "argocd-cm"},
			check{"patch", "", "configmaps", "", engineNamespace, "argocd-cm"},
			check{"create", "", "namespaces", "", "", ""},
			check{"escalate", "rbac.authorization.k8s.io", "clusterroles", "", "", ""},
			check{"bind", "rbac.authorization.k8s.io", "clusterroles", "", "", ""},
			check{"escalate", "rbac.authorization.k8s.io", "roles", "", ops, ""},
			check{"bind", "rbac.authorization.k8s.io", "roles", "", ops, ""},
			check{"impersonate", "", "users", "", "", ""},
			check{"impersonate", "", "groups", "", "", ""},
			check{"impersonate", "", "serviceaccounts", "", ops, ""},
			check{"update", "apiextensions.k8s.io", "customresourcedefinitions", "", "", ""},
			check{"create", "operator.aicr.run", "clusterruntimes", "", "", ""},
		)
	}

	can := func(t *testing.T, user string, c check) bool {
		t.Helper()
		res, err := kc.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + releaseNamespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: c.verb, Group: c.group, Resource: c.resource, Subresource: c.sub, Namespace: c.ns, Name: c.name,
			},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SubjectAccessReview: %v", err)
		}
		return res.Status.Allowed
	}
	for _, b := range binaries {
		t.Run(b, func(t *testing.T) {
			user := v1alpha1.ServiceAccountUser(releaseNamespace, b)
			for _, c := range allowed[b] {
				if !can(t, user, c) {
					t.Errorf("%s cannot %s %s/%s %s in %q named %q; it needs to", b, c.verb, c.group, c.resource, c.sub, c.ns, c.name)
				}
			}
			for _, c := range denied[b] {
				if can(t, user, c) {
					t.Errorf("%s may %s %s/%s %s in %q named %q; it must not", b, c.verb, c.group, c.resource, c.sub, c.ns, c.name)
				}
			}
		})
	}

	t.Run("credrefresher only reads the Secret with static credentials", func(t *testing.T) {
		user := "system:serviceaccount:" + staticNamespace + ":static-aicr-operator-credrefresher"
		if !can(t, user, check{"get", "", "secrets", "", engineNamespace, "aicr-registry"}) {
			t.Error("static credrefresher cannot get the repo-creds Secret")
		}
		if can(t, user, check{"update", "", "secrets", "", engineNamespace, "aicr-registry"}) {
			t.Error("static credrefresher may update the admin's Secret")
		}
	})

	t.Run("the applier server-side applies a new Application with its own identity", func(t *testing.T) {
		app := testApplication(t)
		body, err := json.Marshal(app)
		if err != nil {
			t.Fatal(err)
		}
		force := true
		as := func(b string) dynamic.ResourceInterface {
			return dynamic.NewForConfigOrDie(env.ServiceAccountConfig(releaseNamespace, v1alpha1.ServiceAccountName(b))).
				Resource(testenv.ApplicationGVR).Namespace(engineNamespace)
		}
		if _, err := as("readiness").Patch(ctx, "rbac-test", types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "aicr-operator", Force: &force}); !apierrors.IsForbidden(err) {
			t.Errorf("readiness applied an Application: err %v, want Forbidden", err)
		}
		if _, err := as("applier").Patch(ctx, "rbac-test", types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "aicr-operator", Force: &force}); err != nil {
			t.Fatalf("applier server-side apply of a new Application: %v", err)
		}
		// readiness sees Applications through its informer: list and watch, no get.
		if l, err := as("readiness").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=rbac-test"}); err != nil || len(l.Items) != 1 {
			t.Errorf("readiness cannot list the Application: %v", err)
		}
		if err := as("applier").Delete(ctx, "rbac-test", metav1.DeleteOptions{}); err != nil {
			t.Errorf("applier delete: %v", err)
		}
	})
}

func testApplication(t testing.TB) map[string]any {
	t.Helper()
	b, err := plan.ParseBundle([]byte(`apiVersion: bundle.aicr.run/v1alpha1
kind: Bundle
metadata: {name: rbac-test, version: "1"}
components:
  - name: rbac-test
    chart: {path: charts/rbac-test, digest: sha256:0000000000000000000000000000000000000000000000000000000000000000}
    namespace: rbac-test
`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Resolve(b, plan.Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := p.Release("rbac-test")
	app, err := appspec.Build(appspec.Settings{EngineNamespace: engineNamespace, Project: "aicr", Repository: "registry.example.com/aicr"},
		appspec.Input{Runtime: "cluster", RuntimeUID: "uid-1", PlanDigest: p.Digest(), Release: r})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(app)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "status")
	delete(m["metadata"].(map[string]any), "creationTimestamp")
	return m
}

func ensureNamespaces(ctx context.Context, t testing.TB, kc kubernetes.Interface, names ...string) {
	t.Helper()
	for _, n := range names {
		_, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create namespace %s: %v", n, err)
		}
	}
}

// apply server-side applies one rendered object (dry run when dryRun).
func apply(ctx context.Context, t testing.TB, dyn dynamic.Interface, mapper *restmapper.DeferredDiscoveryRESTMapper, o *unstructured.Unstructured, dryRun bool) {
	t.Helper()
	gvk := o.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Errorf("%s %s: the API server does not serve this kind: %v", gvk.Kind, o.GetName(), err)
		return
	}
	body, err := json.Marshal(o.Object)
	if err != nil {
		t.Fatal(err)
	}
	var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if m.Scope.Name() == "namespace" {
		ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
	}
	force := true
	opts := metav1.PatchOptions{FieldManager: "helm", Force: &force}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if _, err := ri.Patch(ctx, o.GetName(), types.ApplyPatchType, body, opts); err != nil {
		t.Errorf("apply %s %s/%s: %v", gvk.Kind, o.GetNamespace(), o.GetName(), err)
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestNATSPodsRollWhenTheirConfigChanges proves the NATS pod template carries the checksum of
// the nats.conf the chart renders, so an upgrade that changes it (a version's permissions, a
// nats.* value) rolls the pods: nats-server reads its configuration only at start. Rendering
// the same values twice gives the same checksum, so an unchanged upgrade rolls nothing.
func TestNATSPodsRollWhenTheirConfigChanges(t *testing.T) {
	checksum := func(set ...string) (string, string) {
		objs := charttest.MustRender(t, set...)
		sts := charttest.Find(objs, "StatefulSet", charttest.Release+"-nats")
		if sts == nil {
			t.Fatalf("no StatefulSet %s-nats", charttest.Release)
		}
		sum, _, _ := unstructured.NestedString(sts.Object, "spec", "template", "metadata", "annotations", "checksum/config")
		return sum, charttest.NATSConf(t, objs)
	}
	sum, conf := checksum()
	if want := fmt.Sprintf("%x", sha256.Sum256([]byte(strings.TrimSuffix(conf, "\n")))); sum != want {
		t.Fatalf("checksum/config %q, want the sha256 of the rendered nats.conf %s", sum, want)
	}
	if again, _ := checksum(); again != sum {
		t.Errorf("the same values rendered checksum %s, then %s", sum, again)
	}
	if other, otherConf := checksum("nats.jetstream.maxFileStore=2Gi"); other == sum || otherConf == conf {
		t.Errorf("nats.jetstream.maxFileStore changed the config (%v) but not the checksum (%v)", otherConf != conf, other != sum)
	}
}
