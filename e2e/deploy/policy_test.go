//go:build integration

package deploy

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/aicr-run/aicr-operator/e2e/charttest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// TestPlannerDeletesOnlyPlans applies the chart's RBAC and its ValidatingAdmissionPolicy to a real
// API server and acts as the planner's ServiceAccount: RBAC lets it delete ConfigMaps of the
// release namespace (plans have content-derived names), and the policy denies the delete of one
// that is not a plan, such as a bundle, while a plan's delete goes through.
func TestPlannerDeletesOnlyPlans(t *testing.T) {
	env := testenv.Current(t)
	ctx, cancel := context.WithTimeout(context.Background(), applyTimeout)
	defer cancel()
	kc := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(env.Config)))
	ensureNamespaces(ctx, t, kc, releaseNamespace, engineNamespace)
	kinds := []string{"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
	for _, o := range charttest.MustRender(t, "registry.auth=aws") {
		if slices.Contains(kinds, o.GetKind()) {
			apply(ctx, t, dyn, mapper, o, false)
		}
	}

	as := rest.CopyConfig(env.Config)
	as.Impersonate = rest.ImpersonationConfig{UserName: v1alpha1.ServiceAccountUser(releaseNamespace, v1alpha1.BinaryPlanner),
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + releaseNamespace, "system:authenticated"}}
	planner := kubernetes.NewForConfigOrDie(as)
	cm := func(name string, labels map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: releaseNamespace, Labels: labels}, Data: map[string]string{"k": "v"}}
	}
	create := func(c *corev1.ConfigMap) {
		t.Helper()
		if _, err := kc.CoreV1().ConfigMaps(releaseNamespace).Create(ctx, c, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}

	// The policy takes effect once the API server has compiled it: until then a delete goes
	// through, and the bundle is put back for the next try.
	bundle := cm("policy-test-bundle", nil)
	var last error
	err := testenv.WaitFor(ctx, applyTimeout/2, "the planner's delete of a bundle ConfigMap denied", func(ctx context.Context) (bool, error) {
		create(bundle)
		last = planner.CoreV1().ConfigMaps(releaseNamespace).Delete(ctx, bundle.Name, metav1.DeleteOptions{})
		return apierrors.IsForbidden(last) && strings.Contains(last.Error(), "deletes only plan ConfigMaps"), nil
	})
	if err != nil {
		t.Fatalf("%v; the last delete: %v", err, last)
	}
	if _, err := kc.CoreV1().ConfigMaps(releaseNamespace).Get(ctx, bundle.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the bundle after the denied delete: %v", err)
	}

	plan := cm("aicr-plan-policy-test", map[string]string{v1alpha1.LabelRole: v1alpha1.PlanRoleValue})
	create(plan)
	if err := planner.CoreV1().ConfigMaps(releaseNamespace).Delete(ctx, plan.Name, metav1.DeleteOptions{}); err != nil {
		t.Errorf("the planner's delete of a plan ConfigMap: %v", err)
	}
	_ = kc.CoreV1().ConfigMaps(releaseNamespace).Delete(ctx, bundle.Name, metav1.DeleteOptions{})
}
