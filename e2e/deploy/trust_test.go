//go:build integration

package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/aicr-run/aicr-operator/e2e/charttest"
)

// deploymentVolumes returns a Deployment's pod volumes by name.
func deploymentVolumes(t *testing.T, objs []*unstructured.Unstructured, binary string) map[string]map[string]any {
	t.Helper()
	d := charttest.Find(objs, "Deployment", "aicr-operator-"+binary)
	if d == nil {
		t.Fatalf("no Deployment aicr-operator-%s", binary)
	}
	vs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
	out := map[string]map[string]any{}
	for _, v := range vs {
		m := v.(map[string]any)
		out[m["name"].(string)] = m
	}
	return out
}

// TestChartNATSTLS proves TLS on the bus is on by default and wired end to end: the server
// requires it on client connections and cluster routes (and nats-server accepts the
// configuration), every binary dials tls:// and trusts the CA, and a binary's pod gets the CA
// only, never the server's key.
func TestChartNATSTLS(t *testing.T) {
	t.Run("on by default with a CA and certificate the setup Job generates", func(t *testing.T) {
		objs := charttest.MustRender(t)
		conf := charttest.NATSConf(t, objs)
		if !strings.HasPrefix(conf[strings.Index(conf, "tls {"):], "tls {\n  cert_file: \"/etc/nats-tls/tls.crt\"") {
			t.Errorf("nats.conf requires no TLS:\n%s", conf)
		}
		if charttest.Find(objs, "Secret", "aicr-operator-nats-tls") != nil {
			t.Error("the chart renders the NATS certificate: helm template would generate a new one every time")
		}
		args := charttest.SetupJobArgs(t, objs)
		if args["nats-tls-secret"] != "aicr-operator-nats-tls" || args["nats-tls-dns-names"] !=
			"aicr-operator-nats.aicr-system.svc,aicr-operator-nats.aicr-system.svc.cluster.local,*.aicr-operator-nats-headless.aicr-system.svc.cluster.local" {
			t.Errorf("setup Job arguments %v: want the NATS certificate for the Service's names", args)
		}
		data := charttest.RunSetup(t, objs)["aicr-operator-nats-tls"]
		for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
			if len(data[k]) == 0 {
				t.Errorf("the setup Job's Secret aicr-operator-nats-tls has no %s", k)
			}
		}
		for _, b := range binaries {
			args := containerArgs(t, objs, b)
			for _, want := range []string{"--nats-url=tls://aicr-operator-nats.aicr-system.svc:4222", "--nats-tls-ca=/var/run/secrets/aicr/nats-tls/ca.crt"} {
				if !slices.Contains(args, want) {
					t.Errorf("%s args %v lack %s", b, args, want)
				}
			}
			ca := deploymentVolumes(t, objs, b)["nats-ca"]
			want := map[string]any{"name": "nats-ca", "secret": map[string]any{"secretName": "aicr-operator-nats-tls",
				"items": []any{map[string]any{"key": "ca.crt", "path": "ca.crt"}}}}
			if !equalJSON(ca, want) {
				t.Errorf("%s's nats-ca volume = %v, want only ca.crt of the TLS Secret: %v", b, ca, want)
			}
		}
		sts := charttest.Find(objs, "StatefulSet", "aicr-operator-nats")
		vs, _, _ := unstructured.NestedSlice(sts.Object, "spec", "template", "spec", "volumes")
		if !slices.ContainsFunc(vs, func(v any) bool {
			return equalJSON(v, map[string]any{"name": "tls", "secret": map[string]any{"secretName": "aicr-operator-nats-tls"}})
		}) {
			t.Errorf("the NATS StatefulSet mounts no TLS Secret: %v", vs)
		}
		charttest.CheckNATS(t, charttest.NATSOptions{})
	})
	t.Run("cluster routes speak TLS too, and nats-server accepts the configuration", func(t *testing.T) {
		n := charttest.CheckNATS(t, charttest.NATSOptions{Set: []string{"nats.replicas=3"}})
		cluster := n.Conf[strings.Index(n.Conf, "cluster {"):]
		if !strings.Contains(cluster, "tls {") {
			t.Errorf("the cluster block has no TLS:\n%s", cluster)
		}
	})
	t.Run("cert-manager issues the certificate from a CA of its own", func(t *testing.T) {
		objs := charttest.MustRender(t, "certManager.enabled=true")
		ca := charttest.Find(objs, "Certificate", "aicr-operator-nats-ca")
		if isCA, _, _ := unstructured.NestedBool(ca.Object, "spec", "isCA"); ca == nil || !isCA {
			t.Errorf("no CA Certificate aicr-operator-nats-ca: %v", ca)
		}
		if charttest.Find(objs, "Issuer", "aicr-operator-nats-ca") == nil {
			t.Error("no Issuer aicr-operator-nats-ca")
		}
		cert := charttest.Find(objs, "Certificate", "aicr-operator-nats")
		if cert == nil {
			t.Fatal("no Certificate aicr-operator-nats")
		}
		secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
		issuer, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
		dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		if secret != "aicr-operator-nats-tls" || issuer != "aicr-operator-nats-ca" || !slices.Contains(dns, "aicr-operator-nats.aicr-system.svc") ||
			!slices.Contains(dns, "*.aicr-operator-nats-headless.aicr-system.svc.cluster.local") {
			t.Errorf("Certificate aicr-operator-nats: secret %s, issuer %s, names %v", secret, issuer, dns)
		}
		if charttest.Find(objs, "Secret", "aicr-operator-nats-tls") != nil || charttest.SetupJobArgs(t, objs)["nats-tls-secret"] != "" {
			t.Error("the chart or its setup Job generates a NATS certificate although cert-manager issues it")
		}
	})
	t.Run("turned off: plain nats:// and no CA", func(t *testing.T) {
		objs := charttest.MustRender(t, "nats.tls.enabled=false")
		if strings.Contains(charttest.NATSConf(t, objs), "tls {") {
			t.Error("nats.conf has a tls block with nats.tls.enabled=false")
		}
		for _, b := range binaries {
			args := strings.Join(containerArgs(t, objs, b), " ")
			if !strings.Contains(args, "--nats-url=nats://") || strings.Contains(args, "--nats-tls-ca") {
				t.Errorf("%s args %s", b, args)
			}
		}
	})
	t.Run("your own NATS: the CA of nats.tls.caSecret", func(t *testing.T) {
		objs := charttest.MustRender(t, "nats.enabled=false", "nats.url=tls://nats.example.com:4222", "nats.tls.caSecret=my-nats-ca")
		for _, b := range binaries {
			args := containerArgs(t, objs, b)
			if !slices.Contains(args, "--nats-url=tls://nats.example.com:4222") || !slices.Contains(args, "--nats-tls-ca=/var/run/secrets/aicr/nats-tls/ca.crt") {
				t.Errorf("%s args %v", b, args)
			}
			secret, _, _ := unstructured.NestedString(deploymentVolumes(t, objs, b)["nats-ca"], "secret", "secretName")
			if secret != "my-nats-ca" {
				t.Errorf("%s mounts the CA of %q, want my-nats-ca", b, secret)
			}
		}
	})
}

// TestChartAppProjectWhitelist proves the AppProject lists cluster-scoped kinds one by one, from
// engine.clusterResourceWhitelist, and that a wildcard is refused with what to do instead.
func TestChartAppProjectWhitelist(t *testing.T) {
	whitelist := func(objs []*unstructured.Unstructured) []any {
		p := charttest.Find(objs, "AppProject", "aicr")
		if p == nil {
			t.Fatal("no AppProject aicr")
		}
		w, _, _ := unstructured.NestedSlice(p.Object, "spec", "clusterResourceWhitelist")
		return w
	}
	raw, err := os.ReadFile(filepath.Join(charttest.ChartDir(t), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Engine struct {
			ClusterResourceWhitelist []any `json:"clusterResourceWhitelist"`
		} `json:"engine"`
	}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	got := whitelist(charttest.MustRender(t))
	if !equalJSON(got, values.Engine.ClusterResourceWhitelist) || len(got) == 0 {
		t.Errorf("default whitelist %v, want the values' %v", got, values.Engine.ClusterResourceWhitelist)
	}
	for _, k := range got {
		if m := k.(map[string]any); m["group"] == "*" || m["kind"] == "*" {
			t.Errorf("the default whitelist has a wildcard: %v", m)
		}
	}
	got = whitelist(charttest.MustRender(t, "engine.clusterResourceWhitelist[0].group=example.com", "engine.clusterResourceWhitelist[0].kind=Widget"))
	if !equalJSON(got, []any{map[string]any{"group": "example.com", "kind": "Widget"}}) {
		t.Errorf("a custom whitelist renders as %v", got)
	}
	_, err = charttest.Render(t, charttest.Release, charttest.Namespace, "registry.repository="+charttest.Repository,
		"engine.clusterResourceWhitelist[0].group=*", "engine.clusterResourceWhitelist[0].kind=*")
	if err == nil || !strings.Contains(err.Error(), "engine.clusterResourceWhitelist: */*: list each cluster-scoped group and kind") {
		t.Errorf("a wildcard whitelist: %v, want a refusal naming engine.clusterResourceWhitelist", err)
	}
}

// TestChartWebhooksAreTheShippedConfiguration proves the chart installs the webhooks of
// admission/config/webhook.yaml (which docs/admission.md describes and the admission binary's
// integration tests run against a real API server): the same names, rules, selectors, failure
// policies, side effects (NoneOnDryRun: the audit publish is skipped on a dry run) and match
// conditions. Only the service, CA bundle, timeout and the list of the release's identities differ.
func TestChartWebhooksAreTheShippedConfiguration(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(charttest.RepoRoot(t), "admission", "config", "webhook.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var shipped admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(raw, &shipped); err != nil {
		t.Fatal(err)
	}
	vwc := charttest.Find(charttest.MustRender(t), "ValidatingWebhookConfiguration", "aicr-operator")
	if vwc == nil {
		t.Fatal("no ValidatingWebhookConfiguration aicr-operator")
	}
	var chart admissionregistrationv1.ValidatingWebhookConfiguration
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(vwc.Object, &chart); err != nil {
		t.Fatal(err)
	}
	identities := regexp.MustCompile(`\[\s*'system:serviceaccount:[^\]]*\]`)
	normalize := func(hooks []admissionregistrationv1.ValidatingWebhook) []admissionregistrationv1.ValidatingWebhook {
		out := make([]admissionregistrationv1.ValidatingWebhook, len(hooks))
		for i, h := range hooks {
			h.ClientConfig, h.TimeoutSeconds = admissionregistrationv1.WebhookClientConfig{}, nil
			h.MatchConditions = slices.Clone(h.MatchConditions)
			for j := range h.MatchConditions {
				h.MatchConditions[j].Expression = strings.Join(strings.Fields(identities.ReplaceAllString(h.MatchConditions[j].Expression, "[IDENTITIES]")), " ")
			}
			out[i] = h
		}
		return out
	}
	if diff := cmpDiff(normalize(shipped.Webhooks), normalize(chart.Webhooks)); diff != "" {
		t.Errorf("the chart's webhooks differ from admission/config/webhook.yaml (-shipped +chart):\n%s", diff)
	}
	for _, h := range chart.Webhooks {
		if h.SideEffects == nil || *h.SideEffects != admissionregistrationv1.SideEffectClassNoneOnDryRun {
			t.Errorf("webhook %s sideEffects %v, want NoneOnDryRun: it publishes an audit record except on a dry run", h.Name, h.SideEffects)
		}
	}
}
