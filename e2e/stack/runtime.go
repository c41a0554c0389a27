package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/rolloutsteps"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// ApplyBundle writes the bundle ConfigMap the ClusterRuntime points at.
func (s *Stack) ApplyBundle(ctx context.Context, bundleYAML []byte) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: BundleConfigMap, Namespace: OperatorNamespace},
		Data:       map[string]string{v1alpha1.DefaultBundleKey: string(bundleYAML)},
	}
	cms := s.Kube.CoreV1().ConfigMaps(OperatorNamespace)
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create bundle configmap: %w", err)
		}
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update bundle configmap: %w", err)
		}
	}
	return nil
}

// ExampleBundle renders the example bundle with the pushed digests.
func (s *Stack) ExampleBundle(version string) ([]byte, error) {
	return BundleYAML("gpu-stack", version, ExampleComponents(), s.Digests)
}

// ApplyRuntime creates the ClusterRuntime, or updates its spec.
func (s *Stack) ApplyRuntime(ctx context.Context, spec v1alpha1.ClusterRuntimeSpec) error {
	rt := &v1alpha1.ClusterRuntime{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "ClusterRuntime"},
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.RuntimeName},
		Spec:       spec,
	}
	res := s.Dynamic.Resource(v1alpha1.ClusterRuntimeResource)
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rt)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: obj}
	if _, err := res.Create(ctx, u, metav1.CreateOptions{}); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create clusterruntime: %w", err)
		}
		// The whole spec replaced by a JSON patch, without a resourceVersion, as a user's
		// kubectl apply or edit of the spec would: the planner writes the status and its
		// finalizer whenever it reconciles, and a read-modify-update retried four times in
		// 310 ms lost that race on every try once, on a loaded machine.
		patch, err := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec", "value": obj["spec"]}})
		if err != nil {
			return err
		}
		if _, err := res.Patch(ctx, v1alpha1.RuntimeName, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("update clusterruntime spec: %w", err)
		}
	}
	return nil
}

// DefaultRuntimeSpec points at the bundle ConfigMap.
func DefaultRuntimeSpec() v1alpha1.ClusterRuntimeSpec {
	return v1alpha1.ClusterRuntimeSpec{Bundle: v1alpha1.BundleSource{ConfigMap: &v1alpha1.ConfigMapBundleSource{Name: BundleConfigMap, Namespace: OperatorNamespace, Key: v1alpha1.DefaultBundleKey}}}
}

// Runtime reads the ClusterRuntime.
func (s *Stack) Runtime(ctx context.Context) (*v1alpha1.ClusterRuntime, error) {
	rt, err := s.Operator.Runtimes().Get(ctx, v1alpha1.RuntimeName)
	if err != nil {
		return nil, err
	}
	return rt, nil
}

// Rollout reads a RuntimeRollout, every one of its steps in Status.Steps.
func (s *Stack) Rollout(ctx context.Context, name string) (*v1alpha1.RuntimeRollout, error) {
	ro, err := s.Operator.Rollouts().Get(ctx, name)
	if err != nil {
		return nil, err
	}
	return s.expandSteps(ctx, ro)
}

// DecodeRollout decodes a RuntimeRollout (a watch event's object) and reads the steps its status
// leaves to ConfigMaps (shared/rolloutsteps), so Status.Steps holds every step.
func (s *Stack) DecodeRollout(ctx context.Context, u *unstructured.Unstructured) (*v1alpha1.RuntimeRollout, error) {
	var ro v1alpha1.RuntimeRollout
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ro); err != nil {
		return nil, fmt.Errorf("decode rollout %s: %w", u.GetName(), err)
	}
	return s.expandSteps(ctx, &ro)
}

// expandSteps reads the steps ro's status leaves to ConfigMaps into Status.Steps.
func (s *Stack) expandSteps(ctx context.Context, ro *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error) {
	steps, err := rolloutsteps.Expand(ctx, ro, func(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
		return s.Kube.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	})
	if err != nil {
		return nil, err
	}
	ro.Status.Steps = steps
	return ro, nil
}

// Blocker says why the runtime is not Ready, from its conditions.
func Blocker(rt *v1alpha1.ClusterRuntime) string {
	for _, t := range []string{v1alpha1.ConditionStalled, v1alpha1.ConditionMessagesParked, v1alpha1.ConditionResolved, v1alpha1.ConditionEngineAvailable, v1alpha1.ConditionReady} {
		c := meta.FindStatusCondition(rt.Status.Conditions, t)
		if c == nil {
			continue
		}
		bad := v1alpha1.TrueNeedsAPerson(t) == (c.Status == metav1.ConditionTrue)
		if bad {
			return fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	return "no conditions yet"
}

// WaitCondition waits until the runtime's condition has status and (when not empty) reason.
func (s *Stack) WaitCondition(ctx context.Context, timeout time.Duration, condType string, status metav1.ConditionStatus, reason string) (*v1alpha1.ClusterRuntime, error) {
	var last *v1alpha1.ClusterRuntime
	err := testenv.WaitFor(ctx, timeout, fmt.Sprintf("ClusterRuntime %s=%s %s", condType, status, reason), func(ctx context.Context) (bool, error) {
		rt, err := s.Runtime(ctx)
		if err != nil {
			return false, nil
		}
		last = rt
		c := meta.FindStatusCondition(rt.Status.Conditions, condType)
		return c != nil && c.Status == status && (reason == "" || c.Reason == reason) && c.ObservedGeneration == rt.Generation, nil
	})
	if err != nil && last != nil {
		return last, fmt.Errorf("%w (runtime: %s)", err, Blocker(last))
	}
	return last, err
}

func httpOK(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
