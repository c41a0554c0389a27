//go:build bench

package bench

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// createRuntime creates the ClusterRuntime of the benchmarks, its bundle the bench ConfigMap.
func createRuntime(ctx context.Context) error {
	rt := &v1alpha1.ClusterRuntime{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "ClusterRuntime"},
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.RuntimeName},
		Spec: v1alpha1.ClusterRuntimeSpec{Bundle: v1alpha1.BundleSource{ConfigMap: &v1alpha1.ConfigMapBundleSource{
			Name: bundleConfigMap, Namespace: operatorNamespace, Key: "bundle.yaml"}}},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rt)
	if err != nil {
		return err
	}
	if _, err := h.dyn.Resource(v1alpha1.ClusterRuntimeResource).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create clusterruntime: %w", err)
	}
	return nil
}

// waitRolledOut watches the ClusterRuntime until Ready=True/RolledOut at the plan digest, and
// returns when the watch delivered that status.
func waitRolledOut(ctx context.Context, digest string) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, rolloutTimeout)
	defer cancel()
	res := h.dyn.Resource(v1alpha1.ClusterRuntimeResource)
	var last string
	for {
		list, err := res.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + v1alpha1.RuntimeName})
		if err != nil {
			return time.Time{}, fmt.Errorf("list clusterruntime: %w", err)
		}
		for i := range list.Items {
			ok, why := rolledOut(&list.Items[i], digest)
			if ok {
				return time.Now(), nil
			}
			last = why
		}
		w, err := res.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + v1alpha1.RuntimeName, ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			return time.Time{}, fmt.Errorf("watch clusterruntime: %w", err)
		}
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			done, why := rolledOut(u, digest)
			if done {
				w.Stop()
				return time.Now(), nil
			}
			last = why
		}
		w.Stop()
		if ctx.Err() != nil {
			return time.Time{}, fmt.Errorf("ClusterRuntime not rolled out to %s within %s (last: %s)", digest, rolloutTimeout, last)
		}
	}
}

func rolledOut(u *unstructured.Unstructured, digest string) (bool, string) {
	var rt v1alpha1.ClusterRuntime
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &rt); err != nil {
		return false, err.Error()
	}
	c := meta.FindStatusCondition(rt.Status.Conditions, v1alpha1.ConditionReady)
	if c == nil {
		return false, "no Ready condition"
	}
	ok := c.Status == metav1.ConditionTrue && c.ObservedGeneration == rt.Generation && rt.Status.ActivePlan == digest
	return ok, fmt.Sprintf("Ready=%s %s: %s (active plan %s, progress %q)", c.Status, c.Reason, c.Message, rt.Status.ActivePlan, rt.Status.Progress)
}
