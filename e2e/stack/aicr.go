package stack

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/shared/plan"
)

// AICRBundleDir is the AICR-layout example (what `aicr bundle` writes), under examples/.
const AICRBundleDir = "aicr-bundle"

// AICRMirrorDir holds stand-ins for the example's upstream charts, named and versioned as its
// upstream.env files say, for --mirror-from.
const AICRMirrorDir = "aicr-bundle-mirror"

// ExamplesDir finds examples/ from the working directory up.
func ExamplesDir() (string, error) {
	charts, err := ChartsDir()
	if err != nil {
		return "", err
	}
	return filepath.Dir(charts), nil
}

// AICRImport is an AICR bundle folder imported into the stack's registry.
type AICRImport struct {
	// Document is the bundle document the import wrote; Bundle the same, parsed.
	Document []byte
	Bundle   *plan.Bundle
	// Report is what the import printed: the charts with their digests and the steps.
	Report string
}

// ImportAICR runs `kubectl-aicr bundle import dir` as a person would against the stack's registry
// (its login, --plain-http, the stand-in upstream charts from examples/aicr-bundle-mirror as
// --mirror-from, recipe as --recipe when not empty), then makes every component of the bundle
// usable the way the chart's componentNamespaces and the per-chart repository Secrets do: its
// namespace, the AppProject destination, the repository Secret (the local registry is plain
// http). The charts' digests go into s.Digests. It is idempotent.
func (s *Stack) ImportAICR(ctx context.Context, dir, recipe string) (*AICRImport, error) {
	examples, err := ExamplesDir()
	if err != nil {
		return nil, err
	}
	out := filepath.Join(s.Dir, "aicr-import", filepath.Base(dir)+".yaml")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return nil, err
	}
	args := []string{"bundle", "import", dir, "--registry", s.Repository, "--plain-http",
		"--mirror-from", filepath.Join(examples, AICRMirrorDir), "-o", out}
	if recipe != "" {
		args = append(args, "--recipe", recipe)
	}
	var stdin string
	if a := s.Env.Registry.Auth; a != nil {
		args = append(args, "--username", a.Username, "--password-stdin")
		stdin = a.Password + "\n"
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(s.opts.BinDir, "kubectl-aicr"), args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kubectl-aicr bundle import %s: %w: %s%s", dir, err, stdout.String(), stderr.String())
	}
	doc, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("read the imported bundle: %w", err)
	}
	b, err := plan.ParseBundle(doc)
	if err != nil {
		return nil, fmt.Errorf("the imported bundle does not parse: %w", err)
	}
	for _, c := range b.Components {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.Namespace}}
		if _, err := s.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create namespace %s: %w", c.Namespace, err)
		}
		if err := s.AllowDestination(ctx, c.Namespace); err != nil {
			return nil, err
		}
		if !s.opts.AnonymousRegistry {
			if err := s.Env.CreateOCIRepoSecret(ctx, "aicr-repo-"+c.Name, "oci://"+s.Repository+"/"+c.Chart.Path); err != nil {
				return nil, err
			}
		}
		s.mu.Lock()
		s.Digests[c.Name] = c.Chart.Digest
		s.mu.Unlock()
	}
	return &AICRImport{Document: doc, Bundle: b, Report: stdout.String()}, nil
}
