//go:build e2e

package lifecycle

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// keeperChart ships two CRDs (one in crds/, one as a template), a ConfigMap annotated
// helm.sh/resource-policy: keep and one that is not.
var keeperChart = filepath.Join("..", "testdata", "charts", "keeper")

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// "Argo CD then deletes the release's resources, except CRDs and resources annotated
// helm.sh/resource-policy: keep" (docs/argocd.md, Removal): a release of the keeper chart is
// installed with the example stack, then removed with a person's approval. Its Application
// goes, and so does its plain ConfigMap (Argo CD's cascade ran); both CRDs and the kept
// ConfigMap stay.
func TestAnApprovedRemoveLeavesCRDsAndKeptResources(t *testing.T) {
	s := stacktest.Need(t)
	ctx := t.Context()
	keeper := stack.ExampleComponent{Name: "keeper", Dir: "charts", Namespace: "e2e-keeper", Values: map[string]any{"greeting": "hello"}}
	if err := s.AddChart(ctx, keeper, keeperChart); err != nil {
		t.Fatal(err)
	}
	bundle, spec := current(t, s)
	without := bundle
	with, err := stack.BundleYAML("gpu-stack", "1.0.0", append(stack.ExampleComponents(), keeper), s.Digests)
	if err != nil {
		t.Fatal(err)
	}
	ensure(t, s, with, spec)
	crds := []string{"gadgets.keeper.e2e.aicr.run", "widgets.keeper.e2e.aicr.run"}
	cms := s.Kube.CoreV1().ConfigMaps(keeper.Namespace)
	t.Cleanup(func() { // leave no CRD of the test's behind for the tests after
		for _, name := range crds {
			_ = s.Dynamic.Resource(crdGVR).Delete(context.Background(), name, metav1.DeleteOptions{})
		}
		_ = cms.Delete(context.Background(), "keeper-kept", metav1.DeleteOptions{})
	})
	for _, name := range crds {
		if _, err := s.Dynamic.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Fatalf("CRD %s of the installed release: %v", name, err)
		}
	}
	for _, name := range []string{"keeper-kept", "keeper-config"} {
		if _, err := cms.Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Fatalf("ConfigMap %s of the installed release: %v", name, err)
		}
	}

	ro := change(t, s, without, spec)
	stacktest.StepOf(t, ro, keeper.Name, v1alpha1.ActionRemove)
	if _, err := s.WaitCondition(ctx, stacktest.ChangeTimeout, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonAwaitingApproval); err != nil {
		t.Fatal(err)
	}
	approve(t, s, ro.Name, "e2e: keeper leaves the bundle")
	err = testenv.WaitFor(ctx, goneTimeout, "Application "+keeper.Name+" and its ConfigMap keeper-config deleted", func(ctx context.Context) (bool, error) {
		_, aerr := s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace).Get(ctx, keeper.Name, metav1.GetOptions{})
		_, cerr := cms.Get(ctx, "keeper-config", metav1.GetOptions{})
		if apierrors.IsNotFound(aerr) && apierrors.IsNotFound(cerr) {
			return true, nil
		}
		return false, fmt.Errorf("application: %v; configmap: %v", aerr, cerr)
	})
	if err != nil {
		t.Fatal(err)
	}
	done := waitRolloutDone(t, s, ro.Name)
	if rm, _ := stacktest.FindStep(done, keeper.Name); rm.State != v1alpha1.StepSucceeded {
		t.Errorf("Remove step %s, want Succeeded", rm.State)
	}
	// Argo CD deleted what it deletes before it let the Application go: what is here now stays.
	for _, name := range crds {
		crd, err := s.Dynamic.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("CRD %s after the approved Remove: %v; want it kept", name, err)
		} else if crd.GetDeletionTimestamp() != nil {
			t.Errorf("CRD %s after the approved Remove is being deleted (%s); want it kept", name, crd.GetDeletionTimestamp())
		}
	}
	if cm, err := cms.Get(ctx, "keeper-kept", metav1.GetOptions{}); err != nil {
		t.Errorf("ConfigMap keeper-kept (helm.sh/resource-policy: keep) after the approved Remove: %v; want it kept", err)
	} else if cm.DeletionTimestamp != nil {
		t.Errorf("ConfigMap keeper-kept (helm.sh/resource-policy: keep) is being deleted after the approved Remove; want it kept")
	}
	waitRolledOut(t, s)
}
