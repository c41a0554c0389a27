package stack

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// refuseTimeout bounds the wait for an admission policy to take effect, or to be gone.
const refuseTimeout = time.Minute

// RefuseApplication makes the API server refuse every create and update of the Application
// name in the engine namespace as Forbidden with message, as a webhook or a policy of the
// cluster's would: a ValidatingAdmissionPolicy named policy and its binding. It returns once a
// dry-run write of the name is refused; allow removes both and returns once one passes again.
func (s *Stack) RefuseApplication(ctx context.Context, policy, name, message string) (allow func(context.Context) error, err error) {
	forbidden := metav1.StatusReasonForbidden
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policy},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"argoproj.io"}, APIVersions: []string{"v1alpha1"}, Resources: []string{"applications"}},
				}}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("object.metadata.name != %q", name),
				Message:    message,
				Reason:     &forbidden,
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	policies := s.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	bindings := s.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	// Tried again until both are in place: under make chaos another fault may have the API server
	// or etcd down at this moment (two faults at once), and a create it did not answer did nothing.
	if err := testenv.WaitFor(ctx, refuseTimeout, "admission policy "+policy+" and its binding created", func(ctx context.Context) (bool, error) {
		if _, err := policies.Create(ctx, vap, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, err
		}
		if _, err := bindings.Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, err
		}
		return true, nil
	}); err != nil {
		_ = bindings.Delete(context.Background(), policy, metav1.DeleteOptions{})
		_ = policies.Delete(context.Background(), policy, metav1.DeleteOptions{})
		return nil, fmt.Errorf("refuse application %s: %w", name, err)
	}
	// A dry run as the admin: nothing is stored, and no audit of the operator's writes counts it.
	probe := func(ctx context.Context) error {
		app := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
			"metadata": map[string]any{"name": name, "namespace": EngineNamespace},
			"spec": map[string]any{"project": Project, "destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "default"},
				"source": map[string]any{"repoURL": "oci://" + s.Repository + "/charts/probe", "targetRevision": "1.0.0"}}}}
		_, err := s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(EngineNamespace).Create(ctx, app, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if apierrors.IsAlreadyExists(err) {
			// an update of the existing one is what a write of the name is then
			var cur *unstructured.Unstructured
			if cur, err = s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(EngineNamespace).Get(ctx, name, metav1.GetOptions{}); err == nil {
				_, err = s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(EngineNamespace).Update(ctx, cur, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
			}
		}
		return err
	}
	if err := testenv.WaitFor(ctx, refuseTimeout, "the policy refusing Application "+name, func(ctx context.Context) (bool, error) {
		err := probe(ctx)
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), message), nil
	}); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		return testenv.WaitFor(ctx, refuseTimeout, "the policy refusing Application "+name+" gone", func(ctx context.Context) (bool, error) {
			// Deleted on every try, for the same reason as the creates above.
			if err := bindings.Delete(ctx, policy, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return false, err
			}
			if err := policies.Delete(ctx, policy, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return false, err
			}
			// Any answer but the policy's: it runs before the webhooks, so a webhook's refusal
			// (the operator's own, of the admin's dry run) means the policy let it pass.
			err := probe(ctx)
			var st apierrors.APIStatus
			return err == nil || (errors.As(err, &st) && !strings.Contains(err.Error(), message)), nil
		})
	}, nil
}
