// Package preview computes, without a cluster, what a bundle would do: the plan digest, the steps
// from nothing or from an earlier bundle, and the Applications exactly as the applier writes them
// (shared/appspec.Build, the one builder both use).
package preview

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

// Options say what to preview.
type Options struct {
	// Bundle is the bundle document the plan is resolved from.
	Bundle []byte
	// From is an earlier bundle the stack is at (nil: nothing is installed).
	From []byte
	// Runtime is a ClusterRuntime document whose overrides and placement apply to both bundles
	// (nil: none).
	Runtime []byte
	// Applications renders each release's Application.
	Applications bool
	// Settings are the installation values the Applications depend on.
	Settings appspec.Settings
	// RuntimeUID is written into the ownership annotation (the live ClusterRuntime's UID).
	RuntimeUID string
}

// Result is what a bundle would do.
type Result struct {
	// Digest is the plan's desiredStateDigest.
	Digest string `json:"digest"`
	// FromDigest is the earlier plan's digest, when there is one.
	FromDigest string `json:"fromDigest,omitempty"`
	// Bundle names the bundle.
	Bundle plan.BundleMeta `json:"bundle"`
	// Releases counts the plan's releases.
	Releases int `json:"releases"`
	// Steps a rollout from FromDigest to Digest would take.
	Steps []v1alpha1.Step `json:"steps"`
	// Applications as the applier applies them (no status, no creationTimestamp), with
	// Options.Applications.
	Applications []map[string]any `json:"applications,omitempty"`
	// Plan is the resolved plan; From the earlier one (nil without --from). Neither is printed.
	Plan *plan.Plan `json:"-"`
	From *plan.Plan `json:"-"`
}

// Run resolves the bundles and derives the steps.
func Run(o Options) (*Result, error) {
	in, err := Inputs(o.Runtime)
	if err != nil {
		return nil, err
	}
	to, err := Resolve("--bundle", o.Bundle, in)
	if err != nil {
		return nil, err
	}
	var from *plan.Plan
	if o.From != nil {
		if from, err = Resolve("--from", o.From, in); err != nil {
			return nil, err
		}
	}
	res := &Result{
		Digest:   to.Digest(),
		Bundle:   to.Bundle,
		Releases: len(to.Releases),
		Steps:    plan.Steps(from, to, plan.StepOptions{}),
		Plan:     to,
		From:     from,
	}
	if from != nil {
		res.FromDigest = from.Digest()
	}
	if o.Applications {
		if err := o.Settings.Validate(); err != nil {
			return nil, fmt.Errorf("render applications: %w", err)
		}
		for i := range to.Releases {
			app, err := appspec.Build(o.Settings, appspec.Input{
				Runtime:    v1alpha1.RuntimeName,
				RuntimeUID: o.RuntimeUID,
				PlanDigest: to.Digest(),
				Release:    &to.Releases[i],
			})
			if err != nil {
				return nil, err
			}
			m, err := Manifest(app)
			if err != nil {
				return nil, err
			}
			res.Applications = append(res.Applications, m)
		}
	}
	return res, nil
}

// Manifest is the Application as the applier applies it: without status (Argo CD owns it) and
// without creationTimestamp.
func Manifest(app *argoapp.Application) (map[string]any, error) {
	raw, err := json.Marshal(app)
	if err != nil {
		return nil, fmt.Errorf("encode application %s: %w", app.Name, err)
	}
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // values keep their exact numbers
	if err := dec.Decode(&obj); err != nil {
		return nil, fmt.Errorf("encode application %s: %w", app.Name, err)
	}
	delete(obj, "status")
	if meta, ok := obj["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	return obj, nil
}

// Resolve parses a bundle and resolves it with the runtime's inputs; errors name the flag and the
// field at fault.
func Resolve(flagName string, bundle []byte, in plan.Inputs) (*plan.Plan, error) {
	b, err := plan.ParseBundle(bundle)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	p, err := plan.Resolve(b, in)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	return p, nil
}

// Inputs reads overrides and placement from a ClusterRuntime document (YAML or JSON).
func Inputs(runtimeDoc []byte) (plan.Inputs, error) {
	if len(bytes.TrimSpace(runtimeDoc)) == 0 {
		return plan.Inputs{}, nil
	}
	var rt v1alpha1.ClusterRuntime
	if err := yaml.UnmarshalStrict(runtimeDoc, &rt); err != nil {
		return plan.Inputs{}, fmt.Errorf("--runtime: not a ClusterRuntime document: %w", err)
	}
	if rt.Kind != "ClusterRuntime" {
		return plan.Inputs{}, fmt.Errorf("--runtime: kind %q; a ClusterRuntime document is expected", rt.Kind)
	}
	return plan.Inputs{Overrides: rt.Spec.Overrides, Placement: rt.Spec.Placement}, nil
}

// ReadFile reads a flag's file ("-" is standard input).
func ReadFile(flagName, path string, stdin io.Reader) ([]byte, error) {
	if path == "-" {
		data, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("%s: read standard input: %w", flagName, err)
		}
		return data, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	return data, nil
}

// Write renders the result: "text" (a summary, then the Applications as YAML documents), "yaml"
// or "json" (the whole Result).
func Write(w io.Writer, r *Result, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case "yaml":
		out, err := yaml.Marshal(r)
		if err != nil {
			return fmt.Errorf("encode result: %w", err)
		}
		_, err = w.Write(out)
		return err
	case "", "text":
	default:
		return fmt.Errorf("-o %q: use text, yaml or json", format)
	}
	fmt.Fprintf(w, "plan %s\n", r.Digest)
	fmt.Fprintf(w, "  bundle %s %s, %d releases\n", r.Bundle.Name, r.Bundle.Version, r.Releases)
	if r.FromDigest != "" {
		fmt.Fprintf(w, "  from plan %s\n", r.FromDigest)
	}
	if r.FromDigest == r.Digest && r.FromDigest != "" {
		fmt.Fprintf(w, "same plan: no rollout\n")
	}
	fmt.Fprintf(w, "%d steps:\n", len(r.Steps))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, st := range r.Steps {
		action := string(st.Action)
		if st.ReadinessGate {
			action += " (gate)"
		}
		after := "-"
		if len(st.DependsOn) > 0 {
			after = joinComma(st.DependsOn)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\tafter %s\n", st.Index, st.Release, action, after)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, app := range r.Applications {
		out, err := yaml.Marshal(app)
		if err != nil {
			return fmt.Errorf("encode application: %w", err)
		}
		fmt.Fprintf(w, "---\n%s", out)
	}
	return nil
}

func joinComma(s []string) string {
	var b bytes.Buffer
	for i, x := range s {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(x)
	}
	return b.String()
}
