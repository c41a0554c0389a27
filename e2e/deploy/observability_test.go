//go:build integration

package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/aicr-run/aicr-operator/e2e/charttest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// metricName finds the metric names a PromQL expression reads: the operator's (aicr_*) and
// Prometheus's own up.
var metricName = regexp.MustCompile(`\b(aicr_[a-z0-9_]+|up)\b`)

// family is the metric a sample name belongs to: a histogram's _bucket, _sum and _count are the
// histogram's.
func family(name string, histograms map[string]bool) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && histograms[base] {
			return base
		}
	}
	return name
}

// documentedMetrics reads the metric tables and lists of docs/observability.md: every backquoted
// aicr_ name, and which of them are histograms. "..._name" shorthands are expanded with the
// aicr_<binary>_ prefix of the metric named before them.
func documentedMetrics(t *testing.T) (names, histograms map[string]bool) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(charttest.RepoRoot(t), "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	names, histograms = map[string]bool{"up": true}, map[string]bool{}
	code := regexp.MustCompile("`([a-z_.]+)(\\{[^`]*\\})?`")
	prefix := ""
	for _, line := range strings.Split(string(raw), "\n") {
		for _, m := range code.FindAllStringSubmatch(line, -1) {
			n := m[1]
			switch {
			case strings.HasPrefix(n, "aicr_"):
				names[n] = true
				if parts := strings.Split(n, "_"); len(parts) > 2 {
					prefix = strings.Join(parts[:2], "_") + "_" // aicr_<binary>_
				}
				if strings.HasPrefix(line, "| `"+n+"`") && strings.Contains(line, "| histogram |") {
					histograms[n] = true
				}
			case strings.HasPrefix(n, "..._") && prefix != "":
				names[prefix+strings.TrimPrefix(n, "..._")] = true
			}
		}
	}
	return names, histograms
}

// dashboardExprs returns the PromQL of every panel and variable of the rendered dashboard.
func dashboardExprs(t *testing.T, cm *unstructured.Unstructured) []string {
	t.Helper()
	raw, _, _ := unstructured.NestedString(cm.Object, "data", "aicr-operator.json")
	var d struct {
		UID    string `json:"uid"`
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Query any `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	if d.UID != "aicr-operator" || d.Title == "" {
		t.Errorf("dashboard uid %q title %q", d.UID, d.Title)
	}
	var exprs []string
	for _, p := range d.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q has an empty query", p.Title)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(map[string]any); ok {
			exprs = append(exprs, fmt.Sprint(q["query"]))
		}
	}
	return exprs
}

// ruleExprs returns the alerts of the rendered PrometheusRule, by name.
func ruleExprs(t *testing.T, pr *unstructured.Unstructured) map[string]map[string]any {
	t.Helper()
	groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
	out := map[string]map[string]any{}
	for _, g := range groups {
		rs, _ := g.(map[string]any)["rules"].([]any)
		for _, r := range rs {
			rule := r.(map[string]any)
			out[fmt.Sprint(rule["alert"])] = rule
		}
	}
	return out
}

// balanced reports whether an expression's brackets pair up: a cheap guard against a
// template that dropped a brace.
func balanced(expr string) bool {
	var stack []rune
	pairs := map[rune]rune{')': '(', '}': '{', ']': '['}
	inString := false
	for _, r := range expr {
		switch {
		case r == '"':
			inString = !inString
		case inString:
		case r == '(' || r == '{' || r == '[':
			stack = append(stack, r)
		case pairs[r] != 0:
			if len(stack) == 0 || stack[len(stack)-1] != pairs[r] {
				return false
			}
			stack = stack[:len(stack)-1]
		}
	}
	return len(stack) == 0 && !inString
}

// Every metric the dashboard's queries and the alerts read is one docs/observability.md lists
// (what the binaries export; e2e/rollout scrapes the same names from the running binaries), and
// each expression is well bracketed.
func TestDashboardAndAlertsReadDocumentedMetrics(t *testing.T) {
	objs := charttest.MustRender(t, "metrics.grafanaDashboard.enabled=true", "metrics.prometheusRule.enabled=true")
	cm := charttest.Find(objs, "ConfigMap", v1alpha1.ReleaseName+"-dashboard")
	pr := charttest.Find(objs, "PrometheusRule", v1alpha1.ReleaseName)
	if cm == nil || pr == nil {
		t.Fatalf("dashboard ConfigMap %v, PrometheusRule %v: want both", cm != nil, pr != nil)
	}
	docs, histograms := documentedMetrics(t)
	exprs := dashboardExprs(t, cm)
	for name, rule := range ruleExprs(t, pr) {
		exprs = append(exprs, fmt.Sprint(rule["expr"]))
		if rule["expr"] == nil || rule["labels"] == nil {
			t.Errorf("alert %s lacks an expression or labels", name)
		}
	}
	used := map[string]bool{}
	for _, e := range exprs {
		if !balanced(e) {
			t.Errorf("unbalanced brackets in %q", e)
		}
		names := metricName.FindAllString(e, -1)
		if len(names) == 0 {
			t.Errorf("%q reads no metric of the operator", e)
		}
		for _, n := range names {
			used[family(n, histograms)] = true
		}
	}
	var missing []string
	for n := range used {
		if !docs[n] {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the dashboard or the alerts read metrics docs/observability.md does not list: %v", missing)
	}
	if len(used) < 20 {
		t.Errorf("the dashboard and alerts read only %d metrics: %v", len(used), used)
	}
}

// What the chart's observability and production values render.
func TestChartObservabilityAndProductionExtras(t *testing.T) {
	label := func(o *unstructured.Unstructured, k string) string { return o.GetLabels()[k] }
	t.Run("by default: a metrics Service per binary, PDBs and spread for the two-replica binaries only", func(t *testing.T) {
		objs := charttest.MustRender(t)
		for _, b := range binaries {
			svc := charttest.Find(objs, "Service", v1alpha1.ReleaseName+"-"+b+"-metrics")
			if svc == nil {
				t.Errorf("no metrics Service for %s", b)
				continue
			}
			ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
			sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
			if !equalJSON(ports, []any{map[string]any{"name": "metrics", "port": int64(8080), "targetPort": "metrics"}}) ||
				sel["app.kubernetes.io/component"] != b || label(svc, "operator.aicr.run/metrics") != "true" {
				t.Errorf("metrics Service of %s: ports %v, selector %v, labels %v", b, ports, sel, svc.GetLabels())
			}
			multi := b == "applier" || b == "admission" // the chart's defaults: two replicas
			pdb := charttest.Find(objs, "PodDisruptionBudget", v1alpha1.ReleaseName+"-"+b)
			if (pdb != nil) != multi {
				t.Errorf("%s: PodDisruptionBudget %v, want %v", b, pdb != nil, multi)
			}
			if pdb != nil {
				if mu, _, _ := unstructured.NestedFieldNoCopy(pdb.Object, "spec", "maxUnavailable"); fmt.Sprint(mu) != "1" {
					t.Errorf("%s: maxUnavailable %v, want 1", b, mu)
				}
			}
			d := charttest.Find(objs, "Deployment", v1alpha1.ReleaseName+"-"+b)
			tsc, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "topologySpreadConstraints")
			if multi != (len(tsc) == 2) {
				t.Errorf("%s: %d topology spread constraints, want %d", b, len(tsc), map[bool]int{true: 2, false: 0}[multi])
			}
		}
		for _, kind := range []string{"ServiceMonitor", "PrometheusRule", "NetworkPolicy"} {
			for _, o := range objs {
				if o.GetKind() == kind {
					t.Errorf("%s %s rendered by default", kind, o.GetName())
				}
			}
		}
		if charttest.Find(objs, "ConfigMap", v1alpha1.ReleaseName+"-dashboard") != nil {
			t.Error("the dashboard rendered by default")
		}
	})
	t.Run("a ServiceMonitor per binary on its metrics Service, with the extra labels", func(t *testing.T) {
		objs := charttest.MustRender(t, "metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.labels.release=prom", "metrics.serviceMonitor.interval=15s")
		for _, b := range binaries {
			sm := charttest.Find(objs, "ServiceMonitor", v1alpha1.ReleaseName+"-"+b)
			if sm == nil {
				t.Errorf("no ServiceMonitor for %s", b)
				continue
			}
			sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
			eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
			svc := charttest.Find(objs, "Service", v1alpha1.ReleaseName+"-"+b+"-metrics")
			for k, v := range sel {
				if label(svc, k) != v {
					t.Errorf("ServiceMonitor %s selects %s=%s, which its metrics Service lacks", b, k, v)
				}
			}
			if wh := charttest.Find(objs, "Service", v1alpha1.ReleaseName+"-admission"); b == "admission" && wh != nil && label(wh, "operator.aicr.run/metrics") == "true" {
				t.Error("the webhook's Service carries the metrics label: its ServiceMonitor would scrape it")
			}
			ep, _ := eps[0].(map[string]any)
			if len(eps) != 1 || ep["port"] != "metrics" || ep["interval"] != "15s" || label(sm, "release") != "prom" {
				t.Errorf("ServiceMonitor %s: endpoints %v, labels %v", b, eps, sm.GetLabels())
			}
		}
		if _, err := charttest.Render(t, v1alpha1.ReleaseName, releaseNamespace, "registry.repository=r.example.com/a", "metrics.serviceMonitor.enabled=true", "metrics.service.enabled=false"); err == nil ||
			!strings.Contains(err.Error(), "metrics.serviceMonitor.enabled needs metrics.service.enabled") {
			t.Errorf("a ServiceMonitor without its Service: %v", err)
		}
	})
	t.Run("the alerts, with their thresholds from the values", func(t *testing.T) {
		objs := charttest.MustRender(t, "metrics.prometheusRule.enabled=true", "metrics.prometheusRule.awaitingApprovalSeconds=7200",
			"metrics.prometheusRule.consumerLagMessages=50", "metrics.prometheusRule.stalledFor=30m", "metrics.prometheusRule.labels.release=prom")
		pr := charttest.Find(objs, "PrometheusRule", v1alpha1.ReleaseName)
		if pr == nil {
			t.Fatal("no PrometheusRule")
		}
		alerts := ruleExprs(t, pr)
		want := []string{"AicrAwaitingApproval", "AicrBinaryDown", "AicrBinaryNotReady", "AicrComponentNotReady", "AicrNATSConsumerLag", "AicrNoLeader", "AicrRegistryTokenExpiring", "AicrRolloutStalled"}
		got := slices.Sorted(func(yield func(string) bool) {
			for k := range alerts {
				if !yield(k) {
					return
				}
			}
		})
		if !slices.Equal(got, want) {
			t.Errorf("alerts %v, want %v", got, want)
		}
		for name, frag := range map[string]string{
			"AicrAwaitingApproval": `reason="AwaitingApproval"}) > 7200`, "AicrNATSConsumerLag": "> 50",
			"AicrRolloutStalled": `reason!="AwaitingApproval"`, "AicrBinaryDown": "aicr-operator-planner-metrics|",
			"AicrNoLeader": `binary=~"planner|readiness|credrefresher"`, "AicrRegistryTokenExpiring": "- time() < 3600",
			"AicrComponentNotReady": `max by (namespace, runtime, release, fence, state) (aicr_readiness_component_fence{namespace="aicr-system",state!="Passed"})`,
		} {
			if e := fmt.Sprint(alerts[name]["expr"]); !strings.Contains(e, frag) || !strings.Contains(e, `namespace="aicr-system"`) {
				t.Errorf("%s: expr %q lacks %q or the release namespace", name, e, frag)
			}
		}
		if alerts["AicrRolloutStalled"]["for"] != "30m" || label(pr, "release") != "prom" {
			t.Errorf("AicrRolloutStalled for %v, labels %v", alerts["AicrRolloutStalled"]["for"], pr.GetLabels())
		}
		// Every alert links its own section of the runbook, a heading of docs/observability.md.
		page, err := os.ReadFile(filepath.Join(charttest.RepoRoot(t), "docs", "observability.md"))
		if err != nil {
			t.Fatal(err)
		}
		const runbook = "https://github.com/aicr-run/aicr-operator/blob/main/docs/observability.md#"
		for name, a := range alerts {
			ann, _ := a["annotations"].(map[string]any)
			url, _ := ann["runbook_url"].(string)
			if url != runbook+strings.ToLower(name) || !strings.Contains(string(page), "\n### "+name+"\n") {
				t.Errorf("%s: runbook_url %q; want %s%s, a section \"### %s\" of docs/observability.md", name, url, runbook, strings.ToLower(name), name)
			}
		}
		if alerts["AicrComponentNotReady"]["for"] != "15m" {
			t.Errorf("AicrComponentNotReady for %v, want the default 15m", alerts["AicrComponentNotReady"]["for"])
		}
		for name, a := range alerts {
			ann, _ := a["annotations"].(map[string]any)
			if s, _ := ann["summary"].(string); !strings.Contains(s, "{{ $") && name != "AicrRegistryTokenExpiring" {
				t.Errorf("%s: summary %q does not name what fired (Prometheus templating lost)", name, s)
			}
		}
	})
	t.Run("the dashboard for Grafana's sidecar, in the namespace asked for", func(t *testing.T) {
		objs := charttest.MustRender(t, "metrics.grafanaDashboard.enabled=true", "metrics.grafanaDashboard.namespace=monitoring",
			"metrics.grafanaDashboard.annotations.grafana_folder=aicr")
		cm := charttest.Find(objs, "ConfigMap", v1alpha1.ReleaseName+"-dashboard")
		if cm == nil {
			t.Fatal("no dashboard ConfigMap")
		}
		if cm.GetNamespace() != "monitoring" || label(cm, "grafana_dashboard") != "1" || cm.GetAnnotations()["grafana_folder"] != "aicr" {
			t.Errorf("dashboard ConfigMap in %s, labels %v, annotations %v", cm.GetNamespace(), cm.GetLabels(), cm.GetAnnotations())
		}
		raw, _, _ := unstructured.NestedString(cm.Object, "data", "aicr-operator.json")
		file, err := os.ReadFile(filepath.Join(charttest.ChartDir(t), "files", "dashboards", "aicr-operator.json"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(raw) != strings.TrimSpace(string(file)) {
			t.Error("the ConfigMap's dashboard is not the chart's files/dashboards/aicr-operator.json")
		}
	})
	t.Run("crds.install false renders no CRD", func(t *testing.T) {
		for _, o := range charttest.MustRender(t, "crds.install=false") {
			if o.GetKind() == "CustomResourceDefinition" {
				t.Errorf("CRD %s rendered with crds.install=false", o.GetName())
			}
		}
	})
	t.Run("replicas above one get a PDB and spread, whichever binary", func(t *testing.T) {
		objs := charttest.MustRender(t, "planner.replicas=2", "topologySpread.topologyKeys={kubernetes.io/hostname}", "topologySpread.whenUnsatisfiable=DoNotSchedule")
		if charttest.Find(objs, "PodDisruptionBudget", v1alpha1.ReleaseName+"-planner") == nil {
			t.Error("no PodDisruptionBudget for two planners")
		}
		d := charttest.Find(objs, "Deployment", v1alpha1.ReleaseName+"-planner")
		tsc, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "topologySpreadConstraints")
		want := []any{map[string]any{"maxSkew": int64(1), "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
			"labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "aicr-operator",
				"app.kubernetes.io/instance": v1alpha1.ReleaseName, "app.kubernetes.io/component": "planner"}}}}
		if !equalJSON(tsc, want) {
			t.Errorf("planner spread %v", tsc)
		}
		for _, o := range charttest.MustRender(t, "podDisruptionBudget.enabled=false", "topologySpread.enabled=false") {
			if o.GetKind() == "PodDisruptionBudget" && o.GetName() != v1alpha1.ReleaseName+"-nats" {
				t.Errorf("PodDisruptionBudget %s with podDisruptionBudget.enabled=false", o.GetName())
			}
		}
	})
	t.Run("NetworkPolicies: each binary only its scrape, probes and reviews in; DNS, the API server and NATS out", func(t *testing.T) {
		objs := charttest.MustRender(t, "networkPolicy.enabled=true", "registry.auth.mode=aws", "networkPolicy.apiServerCIDRs={10.96.0.1/32}")
		for _, b := range binaries {
			np := charttest.Find(objs, "NetworkPolicy", v1alpha1.ReleaseName+"-"+b)
			if np == nil {
				t.Errorf("no NetworkPolicy for %s", b)
				continue
			}
			types, _, _ := unstructured.NestedStringSlice(np.Object, "spec", "policyTypes")
			in, _, _ := unstructured.NestedSlice(np.Object, "spec", "ingress")
			out, _, _ := unstructured.NestedSlice(np.Object, "spec", "egress")
			var inPorts, outPorts []string
			for _, r := range in {
				for _, p := range r.(map[string]any)["ports"].([]any) {
					inPorts = append(inPorts, fmt.Sprint(p.(map[string]any)["port"]))
				}
			}
			for _, r := range out {
				for _, p := range r.(map[string]any)["ports"].([]any) {
					outPorts = append(outPorts, fmt.Sprint(p.(map[string]any)["port"]))
				}
			}
			wantIn, wantOut := []string{"metrics", "health"}, []string{"53", "53", "443", "6443", "4222"}
			if b == "admission" {
				wantIn = append(wantIn, "webhook")
			}
			if b == "credrefresher" {
				wantOut = append(wantOut, "443")
			}
			if !slices.Equal(types, []string{"Ingress", "Egress"}) || !slices.Equal(inPorts, wantIn) || !slices.Equal(outPorts, wantOut) {
				t.Errorf("%s: types %v, ingress ports %v (want %v), egress ports %v (want %v)", b, types, inPorts, wantIn, outPorts, wantOut)
			}
			if !strings.Contains(fmt.Sprint(out), "10.96.0.1/32") {
				t.Errorf("%s: egress to the API server not restricted to its CIDR: %v", b, out)
			}
		}
		if charttest.Find(objs, "NetworkPolicy", v1alpha1.ReleaseName+"-nats") == nil {
			t.Error("no NetworkPolicy for the chart's NATS")
		}
		ext := charttest.MustRender(t, "networkPolicy.enabled=true", "nats.enabled=false", "nats.url=nats://nats.example.com:4333", "networkPolicy.externalNATSPort=4333")
		if charttest.Find(ext, "NetworkPolicy", v1alpha1.ReleaseName+"-nats") != nil {
			t.Error("a NATS NetworkPolicy without the chart's NATS")
		}
		if np := charttest.Find(ext, "NetworkPolicy", v1alpha1.ReleaseName+"-planner"); np == nil || !strings.Contains(fmt.Sprint(np.Object["spec"]), "port:4333") {
			t.Errorf("planner's egress to an external NATS: %v", np)
		}
	})
}

// Every example values file under deploy/ (deploy/values/*.yaml) meets the chart's values schema
// and renders; rendered for a fresh cluster (no cert-manager, no Prometheus Operator: the
// operator's stack brings them), everything it renders is accepted by a real API server that
// serves neither (server-side apply, dry run), so a first install never needs a CRD the stack
// provides.
func TestExampleValuesFiles(t *testing.T) {
	env := testenv.Current(t)
	files, err := filepath.Glob(filepath.Join(charttest.RepoRoot(t), "deploy", "*", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files = slices.DeleteFunc(files, func(f string) bool { return filepath.Base(filepath.Dir(f)) != "values" })
	if len(files) < 2 {
		t.Fatalf("example values files %v, want the minimal and production ones at least", files)
	}
	helm := charttest.Tool(t, "helm")
	ctx, cancel := context.WithTimeout(context.Background(), applyTimeout)
	defer cancel()
	kc := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(env.Config)))
	ensureNamespaces(ctx, t, kc, releaseNamespace, engineNamespace, "monitoring")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if out, err := charttest.Run(t, "", nil, helm, "lint", charttest.ChartDir(t), "--strict", "--kube-version", kubeVersion, "-f", f); err != nil {
				t.Fatalf("helm lint -f %s: %v\n%s", f, err, out)
			}
			out, err := charttest.Run(t, "", nil, helm, "template", v1alpha1.ReleaseName, charttest.ChartDir(t), "--namespace", releaseNamespace, "--kube-version", kubeVersion, "-f", f)
			if err != nil {
				t.Fatalf("helm template -f %s: %v", f, err)
			}
			for _, o := range charttest.Decode(t, out) {
				apply(ctx, t, dyn, mapper, o, true)
			}
		})
	}
}
