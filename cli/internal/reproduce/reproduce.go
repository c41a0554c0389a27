// Package reproduce writes out a plan's inputs (the plan itself, the bundle and the runtime spec it
// came from) so that anyone can re-derive its digest without the cluster:
//
//	kubectl aicr plan --bundle bundle.yaml --runtime clusterruntime.yaml
package reproduce

import (
	"fmt"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/plan"

	"github.com/aicr-run/aicr-operator/cli/internal/preview"
)

// File names written into the folder.
const (
	PlanFile    = "plan.json"
	BundleFile  = "bundle.yaml"
	RuntimeFile = "clusterruntime.yaml"
	ReadmeFile  = "README.txt"
)

// Inputs are what a plan was resolved from.
type Inputs struct {
	// Plan is the stored plan.
	Plan *plan.Plan
	// Bundle is the bundle document the runtime points at.
	Bundle []byte
	// Runtime is the ClusterRuntime; only its spec is written.
	Runtime *v1alpha1.ClusterRuntime
}

// Outcome says whether the written inputs re-derive the plan.
type Outcome struct {
	// Files written, in order.
	Files []string
	// Derived is the digest the written bundle and runtime resolve to.
	Derived string
	// Matches is true when Derived equals the plan's digest.
	Matches bool
	// Problem explains why the inputs do not resolve, when they do not.
	Problem string
}

// Write writes the inputs into dir (created when missing) and re-derives the plan from them.
func Write(dir string, in Inputs) (*Outcome, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create folder %s: %w", dir, err)
	}
	rt := &v1alpha1.ClusterRuntime{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "ClusterRuntime"},
		ObjectMeta: metav1.ObjectMeta{Name: in.Runtime.Name},
		Spec:       in.Runtime.Spec,
	}
	rtYAML, err := yaml.Marshal(rt)
	if err != nil {
		return nil, fmt.Errorf("encode clusterruntime: %w", err)
	}
	out := &Outcome{}
	pin, err := preview.Inputs(rtYAML)
	if err == nil {
		var p *plan.Plan
		if p, err = preview.Resolve("bundle", in.Bundle, pin); err == nil {
			out.Derived = p.Digest()
			out.Matches = out.Derived == in.Plan.Digest()
		}
	}
	if err != nil {
		out.Problem = err.Error()
	}
	readme := fmt.Sprintf(`Inputs of plan %s (bundle %s %s).

  %s              the stored plan, its canonical JSON: sha256sum plan.json is the digest
  %s            the bundle the ClusterRuntime points at
  %s   the ClusterRuntime's spec (overrides and placement)

Re-derive the digest without a cluster:

  kubectl aicr plan --bundle %s --runtime %s

`, in.Plan.Digest(), in.Plan.Bundle.Name, in.Plan.Bundle.Version, PlanFile, BundleFile, RuntimeFile, BundleFile, RuntimeFile)
	switch {
	case out.Matches:
		readme += "These inputs resolve to the plan's digest.\n"
	case out.Problem != "":
		readme += "WARNING: these inputs do not resolve: " + out.Problem + "\n"
	default:
		readme += fmt.Sprintf("WARNING: these inputs resolve to %s, not to the plan's digest: the bundle or the\nruntime changed after the plan was made. plan.json is the plan as it was.\n", out.Derived)
	}
	files := []struct {
		name string
		data []byte
	}{
		{PlanFile, in.Plan.Canonical()}, // exact bytes: sha256sum plan.json is the digest
		{BundleFile, in.Bundle},
		{RuntimeFile, rtYAML},
		{ReadmeFile, []byte(readme)},
	}
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		if err := os.WriteFile(path, f.data, 0o644); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
		out.Files = append(out.Files, path)
	}
	return out, nil
}
