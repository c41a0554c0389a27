package charttest

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/aicr-run/aicr-operator/setup/secrets"
)

// SetupJobArgs returns the arguments of the chart's setup Job, flag name to value (nil when the
// chart renders no Job: nothing to generate).
func SetupJobArgs(t testing.TB, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	job := Find(objs, "Job", Release+"-setup")
	if job == nil {
		return nil
	}
	cs, _, _ := unstructured.NestedSlice(job.Object, "spec", "template", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
	out := map[string]string{}
	for _, a := range args {
		k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		out[k] = v
	}
	return out
}

// RunSetup does what the chart's setup Job does, with its arguments, against an in-memory API
// server, and returns each Secret it makes, by name, with its data. The tests run the chart's
// NATS with them as the cluster would (the Job's own behaviour on a real API server is tested in
// the setup module).
func RunSetup(t testing.TB, objs []*unstructured.Unstructured) map[string]map[string][]byte {
	t.Helper()
	args := SetupJobArgs(t, objs)
	if args == nil {
		return nil
	}
	ctx := context.Background()
	client := k8sfake.NewClientset().CoreV1().Secrets(Namespace)
	if name := args["nats-auth-secret"]; name != "" {
		users := strings.Split(args["nats-users"], ",")
		if args["nats-users"] == "" {
			users = []string{"planner", "applier", "readiness", "credrefresher", "admission", "route"}
		}
		var hashed []string
		for _, u := range users {
			if u != "route" {
				hashed = append(hashed, u)
			}
		}
		if _, err := secrets.Passwords(ctx, client, name, nil, users, hashed); err != nil {
			t.Fatalf("setup: %v", err)
		}
	}
	for _, c := range [][3]string{{"nats-tls-secret", "nats-tls-dns-names", "nats-tls-validity"}, {"webhook-tls-secret", "webhook-tls-dns-names", "webhook-tls-validity"}} {
		name := args[c[0]]
		if name == "" {
			continue
		}
		validity, err := time.ParseDuration(args[c[2]])
		if err != nil {
			t.Fatalf("setup Job argument --%s=%q: %v", c[2], args[c[2]], err)
		}
		names := strings.Split(args[c[1]], ",")
		if _, err := secrets.TLS(ctx, client, name, nil, secrets.Certificate{CommonName: names[0], DNSNames: names, Validity: validity}); err != nil {
			t.Fatalf("setup: %v", err)
		}
	}
	list, err := client.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string][]byte{}
	for _, s := range list.Items {
		out[s.Name] = s.Data
	}
	return out
}
