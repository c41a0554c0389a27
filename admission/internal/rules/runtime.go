package rules

import (
	"context"
	"errors"
	"sort"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

var errMissingObject = errors.New("the request has no object")

// runtime checks a ClusterRuntime: named cluster; its spec written by a person, never the
// operator; its spec resolves into a plan; its cleanup finalizer touched only by the operator.
func (v *Validator) runtime(ctx context.Context, req *admissionv1.AdmissionRequest) Decision {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return Decision{}
	}
	obj, err := decodeJSON[v1alpha1.ClusterRuntime](req.Object.Raw)
	if err != nil {
		return undecodable("ClusterRuntime", err)
	}
	old, err := decodeJSON[v1alpha1.ClusterRuntime](req.OldObject.Raw)
	if err != nil {
		return undecodable("old ClusterRuntime", err)
	}
	if obj == nil {
		return undecodable("ClusterRuntime", errMissingObject)
	}
	var d Decision
	if obj.Name != v1alpha1.RuntimeName {
		d.deny(RuleRuntimeName, "metadata.name",
			"the ClusterRuntime is a singleton and must be named %q (got %q)", v1alpha1.RuntimeName, obj.Name)
	}
	operator := v.IsOperator(req.UserInfo.Username)
	specChanged := old == nil || !equality.Semantic.DeepEqual(old.Spec, obj.Spec)
	if operator && specChanged {
		d.deny(RuleRuntimeSpecOwner, "spec",
			"the operator (%s) may not write a ClusterRuntime's spec: it belongs to the platform admin", req.UserInfo.Username)
	}
	hadFinalizer := old != nil && hasString(old.Finalizers, v1alpha1.RuntimeFinalizer)
	if !operator && hadFinalizer != hasString(obj.Finalizers, v1alpha1.RuntimeFinalizer) {
		verb := "add"
		if hadFinalizer {
			verb = "remove"
		}
		d.deny(RuleRuntimeFinalizer, "metadata.finalizers",
			"only the operator adds or removes the finalizer %s, and %s may not %s it: leave it to the operator (if the operator is uninstalled, see docs/admission.md)",
			v1alpha1.RuntimeFinalizer, who(req), verb)
	}
	// A write that leaves the spec alone (the operator's finalizer, a label) or comes while the
	// runtime is being deleted is not held up by a bundle that stopped resolving since.
	if specChanged && !operator && obj.DeletionTimestamp == nil {
		v.checkResolves(ctx, &d, &obj.Spec)
	}
	return d
}

// checkResolves reads the bundle the spec names and resolves it with the spec's overrides and
// placement, exactly as the planner does; each failure names the field at fault.
func (v *Validator) checkResolves(ctx context.Context, d *Decision, spec *v1alpha1.ClusterRuntimeSpec) {
	if spec.Bundle.OCI != nil {
		// The CRD checks the repository and digest; the artifact is pulled by the planner, which
		// holds the registry credentials, and reports what it found as Resolved.
		return
	}
	src := spec.Bundle.ConfigMap
	if src == nil {
		d.deny(RuleRuntimeResolves, "spec.bundle",
			"a bundle source is required: set spec.bundle.configMap.name to the ConfigMap that holds the bundle, or spec.bundle.oci (repository and digest) to a bundle pushed with kubectl aicr bundle push")
		return
	}
	ns, key := src.Location(v.cfg.Namespace)
	if v.cfg.Bundles == nil {
		d.deny(RuleRuntimeResolves, "spec.bundle.configMap", "admission cannot read bundles (no Kubernetes client); try again later")
		return
	}
	cm, err := v.cfg.Bundles.GetConfigMap(ctx, ns, src.Name)
	switch {
	case apierrors.IsNotFound(err):
		d.deny(RuleRuntimeResolves, "spec.bundle.configMap.name",
			"ConfigMap %s/%s not found: create it with the bundle under key %q, or name an existing ConfigMap", ns, src.Name, key)
		return
	case err != nil:
		d.deny(RuleRuntimeResolves, "spec.bundle.configMap.name",
			"cannot read ConfigMap %s/%s: %v; try again", ns, src.Name, err)
		return
	}
	data, ok := cm.Data[key]
	if !ok {
		raw, okBinary := cm.BinaryData[key]
		data, ok = string(raw), okBinary
	}
	if !ok {
		d.deny(RuleRuntimeResolves, "spec.bundle.configMap.key",
			"ConfigMap %s/%s has no key %q (its keys: %s); set spec.bundle.configMap.key to the key that holds the bundle",
			ns, src.Name, key, keysOf(cm.Data, cm.BinaryData))
		return
	}
	bundle, err := plan.ParseBundle([]byte(data))
	if err == nil {
		_, err = plan.Resolve(bundle, plan.Inputs{
			Overrides:           spec.Overrides,
			Placement:           spec.Placement,
			ForbiddenNamespaces: forbidden(v.cfg.Namespace, v.cfg.EngineNamespace),
		})
	}
	if err == nil {
		return
	}
	var pe *plan.Error
	if errors.As(err, &pe) && strings.HasPrefix(pe.Field, "spec.") {
		d.deny(RuleRuntimeResolves, pe.Field, "%s", pe.Message)
		return
	}
	// A bundle path (components[2].chart.digest): the fault is in the ConfigMap.
	d.deny(RuleRuntimeResolves, "spec.bundle.configMap",
		"the bundle in ConfigMap %s/%s key %q does not resolve: %v; fix the bundle or name another", ns, src.Name, key, err)
}

func forbidden(namespaces ...string) []string {
	var out []string
	for _, ns := range namespaces {
		if ns != "" {
			out = append(out, ns)
		}
	}
	return out
}

func keysOf(data map[string]string, binary map[string][]byte) string {
	keys := make([]string, 0, len(data)+len(binary))
	for k := range data {
		keys = append(keys, k)
	}
	for k := range binary {
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return "none"
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}
