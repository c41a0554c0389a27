package testenv

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNeededToolsFollowTheOptions(t *testing.T) {
	for name, tc := range map[string]struct {
		opts         Options
		wantTools    []string
		wantBinaries []string
	}{
		"bare control plane": {
			opts:         Options{},
			wantTools:    []string{"etcd", "kube-apiserver"},
			wantBinaries: []string{"etcd", "kube-apiserver"},
		},
		"kwok brings controllers": {
			opts:         Options{Kwok: true}.withDefaults(),
			wantTools:    []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"},
			wantBinaries: []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "stages"},
		},
		"argo cd and registry share helm": {
			opts:         Options{ArgoCD: true, Registry: true},
			wantTools:    []string{"argocd", "etcd", "helm", "kube-apiserver", "redis", "registry"},
			wantBinaries: []string{"argocd", "etcd", "helm", "kube-apiserver", "redis-server", "registry"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			tools, bins := neededTools(tc.opts)
			if diff := cmp.Diff(tc.wantTools, tools); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantBinaries, bins); diff != "" {
				t.Errorf("binaries (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResolveToolsFromAFolder(t *testing.T) {
	dir := t.TempDir()
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if err := os.WriteFile(filepath.Join(dir, b), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got, err := resolveTools(Options{ToolsDir: dir})
	if err != nil || got != dir {
		t.Fatalf("resolveTools = %q, %v; want %q", got, err, dir)
	}

	_, err = resolveTools(Options{ToolsDir: dir, ArgoCD: true})
	var missing *MissingToolsError
	if !errors.As(err, &missing) || !errors.Is(err, ErrToolsMissing) {
		t.Fatalf("resolveTools with argocd = %v, want a MissingToolsError", err)
	}
	if diff := cmp.Diff([]string{"argocd", "helm", "redis-server"}, missing.Binaries); diff != "" {
		t.Errorf("missing binaries (-want +got):\n%s", diff)
	}
	for _, want := range []string{"hack/tools.sh ensure argocd helm redis", EnvToolsBin, EnvRequireTools} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
}

func TestResolveToolsReadsTheEnvironmentVariable(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvToolsBin, dir)
	_, err := resolveTools(Options{})
	var missing *MissingToolsError
	if !errors.As(err, &missing) || missing.Dir != dir {
		t.Fatalf("resolveTools = %v, want a MissingToolsError for %s", err, dir)
	}
}

func TestRepoRootIsFoundFromAPackageDir(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "hack", "tools.sh")); err != nil {
		t.Errorf("repo root %s has no hack/tools.sh", root)
	}
}
