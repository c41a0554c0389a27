package plan

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// FuzzResolvePlacement feeds an arbitrary spec.placement (a node selector pair and a toleration
// for each class) to Resolve over the test vector bundle: it never panics, errors are *plan.Error
// naming a spec.placement field, and an accepted plan is deterministic and round-trips.
func FuzzResolvePlacement(f *testing.F) {
	f.Add("nvidia.com/gpu.present", "true", "nvidia.com/gpu", "Exists", "", "NoSchedule", int64(-1), true)
	f.Add("kubernetes.io/os", "linux", "node-role.kubernetes.io/control-plane", "Equal", "x", "NoExecute", int64(30), false)
	f.Add("bad key", "bad value", "", "In", "v", "NoRun", int64(0), true)
	f.Add("", "", "", "", "", "", int64(-1), false)
	f.Add("a/b/c", strings.Repeat("v", 64), "k", "Exists", "", "", int64(5), true)
	b := mustParse(f, readTestdata(f, "vector-bundle.yaml"))
	f.Fuzz(func(t *testing.T, key, value, tolKey, op, tolValue, effect string, seconds int64, accelerated bool) {
		tol := corev1.Toleration{Key: tolKey, Operator: corev1.TolerationOperator(op), Value: tolValue, Effect: corev1.TaintEffect(effect)}
		if seconds >= 0 {
			tol.TolerationSeconds = &seconds
		}
		np := &v1alpha1.NodePlacement{NodeSelector: map[string]string{key: value}, Tolerations: []corev1.Toleration{tol}}
		in := vectorInputs()
		if accelerated {
			in.Placement.Accelerated = np
		} else {
			in.Placement.System = np
		}
		if _, err := Resolve(b, in); err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Resolve error is %T, want *plan.Error: %v", err, err)
			}
			if !strings.HasPrefix(pe.Field, "spec.placement.") && !strings.HasPrefix(pe.Field, "components[") {
				t.Fatalf("error field %q names neither the placement nor the bundle's placement paths", pe.Field)
			}
			if pe.Message == "" {
				t.Fatalf("error without a message: %#v", pe)
			}
		}
		checkPlan(t, b, in)
	})
}
