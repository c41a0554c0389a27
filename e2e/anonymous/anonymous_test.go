//go:build e2e

package anonymous

import (
	"context"
	"net/http"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// "static" registry auth with a registry that needs no credentials: the repo-creds Secret with
// an empty username and password is valid, and the whole example stack rolls out through it,
// with no per-chart repository Secret.
func TestStaticAuthWithAnAnonymousRegistryRollsOut(t *testing.T) {
	s := stacktest.Need(t)
	ctx := t.Context()

	// The registry answers without credentials.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.Env.Registry.Host+"/v2/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("anonymous GET /v2/ answered %d, want 200: the registry needs credentials", resp.StatusCode)
	}
	// Argo CD gets the repo-creds Secret only, with an empty username and password.
	secrets, err := s.Kube.CoreV1().Secrets(stack.EngineNamespace).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelArgoSecretType})
	if err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 1 || secrets.Items[0].Name != stack.RepoCredsSecret {
		var names []string
		for _, sec := range secrets.Items {
			names = append(names, sec.Name+"("+sec.Labels[v1alpha1.LabelArgoSecretType]+")")
		}
		t.Fatalf("Argo CD's credential Secrets %v, want only %s", names, stack.RepoCredsSecret)
	}
	creds := secrets.Items[0]
	if creds.Labels[v1alpha1.LabelArgoSecretType] != v1alpha1.ArgoSecretTypeRepoCreds || string(creds.Data["username"]) != "" ||
		string(creds.Data["password"]) != "" || string(creds.Data["url"]) != "oci://"+s.Repository {
		t.Fatalf("repo-creds Secret: label %q, url %q, username %q, password set %v", creds.Labels[v1alpha1.LabelArgoSecretType],
			creds.Data["url"], creds.Data["username"], len(creds.Data["password"]) > 0)
	}

	bundle, err := s.ExampleBundle("1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ApplyBundle(ctx, bundle); err != nil {
		t.Fatal(err)
	}
	if err := s.ApplyRuntime(ctx, stack.DefaultRuntimeSpec()); err != nil {
		t.Fatal(err)
	}
	// The credentials are usable: credrefresher's report reached the runtime, and nothing holds
	// the rollout.
	var rt *v1alpha1.ClusterRuntime
	err = testenv.WaitFor(ctx, stacktest.ChangeTimeout, "the credentials report on the runtime", func(ctx context.Context) (bool, error) {
		got, err := s.Runtime(ctx)
		if err != nil {
			return false, err
		}
		rt = got
		return got.Status.Credentials != nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := rt.Status.Credentials; c.Mode != "static" || c.Message != "" {
		t.Errorf("status.credentials %+v, want static with no problem", c)
	}
	rt, err = s.WaitCondition(ctx, stacktest.RolloutTimeout, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut)
	if err != nil {
		t.Fatal(err)
	}
	list, err := s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelManagedBy + "=" + v1alpha1.ManagedByValue})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != len(stack.ExampleComponents()) {
		t.Fatalf("%d owned Applications, want %d", len(list.Items), len(stack.ExampleComponents()))
	}
	for i := range list.Items {
		app, err := stacktest.DecodeApplication(&list.Items[i])
		if err != nil {
			t.Fatal(err)
		}
		// Each chart was pulled by digest through the repo-creds Secret alone.
		if app.Status.Sync.Status != argoapp.SyncStatusCodeSynced || app.Status.Sync.Revision != app.Spec.Source.TargetRevision ||
			app.Status.Health.Status != argoapp.HealthStatusHealthy {
			t.Errorf("%s: %s/%s at %s, want Synced/Healthy at %s", app.Name, app.Status.Sync.Status, app.Status.Health.Status,
				app.Status.Sync.Revision, app.Spec.Source.TargetRevision)
		}
	}
	t.Logf("rolled out plan %s through an anonymous registry", rt.Status.ActivePlan)
}
