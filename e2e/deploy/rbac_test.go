//go:build integration

package deploy

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/aicr-run/aicr-operator/e2e/charttest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/kubeaccess"
)

// grant is one verb on one resource (and object name, "*" for any) in one namespace ("" for a
// ClusterRole): the unit both the chart's rules and the declared needs expand into.
type grant struct {
	namespace, group, resource, name, verb string
}

func (g grant) String() string {
	where := "cluster-wide"
	if g.namespace != "" {
		where = "in " + g.namespace
	}
	return fmt.Sprintf("%s %s/%s named %s %s", g.verb, g.group, g.resource, g.name, where)
}

// chartGrants expands every rule of every Role and ClusterRole bound to binary's ServiceAccount.
func chartGrants(t *testing.T, objs []*unstructured.Unstructured, namespace, binary string) map[grant]bool {
	t.Helper()
	decode := func(o *unstructured.Unstructured, into any) {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
			t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	sa := "aicr-operator-" + binary
	if namespace != charttest.Namespace {
		sa = "static-aicr-operator-" + binary
	}
	out := map[grant]bool{}
	for _, o := range objs {
		if o.GetKind() != "RoleBinding" && o.GetKind() != "ClusterRoleBinding" {
			continue
		}
		var b rbacv1.RoleBinding
		decode(o, &b)
		if !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == namespace
		}) {
			continue
		}
		role := charttest.Find(objs, b.RoleRef.Kind, b.RoleRef.Name)
		if b.RoleRef.Kind == "Role" {
			role = nil
			for _, r := range objs {
				if r.GetKind() == "Role" && r.GetName() == b.RoleRef.Name && r.GetNamespace() == o.GetNamespace() {
					role = r
				}
			}
		}
		if role == nil {
			t.Fatalf("%s %s/%s binds a %s %s the chart does not render", o.GetKind(), o.GetNamespace(), o.GetName(), b.RoleRef.Kind, b.RoleRef.Name)
		}
		var r rbacv1.Role
		decode(role, &r)
		for _, rule := range r.Rules {
			names := rule.ResourceNames
			if len(names) == 0 {
				names = []string{"*"}
			}
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, n := range names {
						for _, v := range rule.Verbs {
							out[grant{namespace: role.GetNamespace(), group: g, resource: res, name: n, verb: v}] = true
						}
					}
				}
			}
		}
	}
	return out
}

// neededGrants expands binary's declared needs for a release in namespace, with the chart's
// names and bundle namespaces.
func neededGrants(binary, namespace, mode, project, secret, fullname string, certManager bool, bundles []string) map[grant]bool {
	where := map[kubeaccess.Scope][]string{
		kubeaccess.Cluster: {""}, kubeaccess.Operator: {namespace}, kubeaccess.Engine: {engineNamespace},
		kubeaccess.Bundles: bundles,
	}
	rename := strings.NewReplacer(kubeaccess.NameEngineProject, project, kubeaccess.NameRepoCredsSecret, secret, kubeaccess.NameFullname, fullname)
	out := map[grant]bool{}
	for _, n := range kubeaccess.Needs(binary) {
		if (n.AuthMode != "" && n.AuthMode != mode) || (n.WithoutCertManager && certManager) {
			continue
		}
		names := n.Names
		if len(names) == 0 {
			names = []string{"*"}
		}
		for _, ns := range where[n.Scope] {
			for _, name := range names {
				for _, v := range n.Verbs {
					out[grant{namespace: ns, group: n.Group, resource: n.Resource, name: rename.Replace(name), verb: v}] = true
				}
			}
		}
	}
	return out
}

// TestChartRBACIsTheDeclaredNeeds is the least-privilege test: for every binary, in each way of
// configuring the chart, the RBAC bound to its ServiceAccount grants exactly the calls
// shared/kubeaccess declares it makes. A grant beyond them fails, and so does a need the chart
// misses.
func TestChartRBACIsTheDeclaredNeeds(t *testing.T) {
	for name, tc := range map[string]struct {
		namespace, mode, project, secret string
		certManager                      bool
		bundles                          []string
		set                              []string
	}{
		"aws credentials, bundles in two more namespaces": {
			namespace: charttest.Namespace, mode: "aws", project: "aicr", secret: "aicr-registry", bundles: []string{"bundles-a", "bundles-b"},
			set: []string{"registry.auth=aws", "bundleNamespaces={bundles-a,bundles-b," + charttest.Namespace + "}"},
		},
		"cert-manager issues the certificates": {
			namespace: charttest.Namespace, mode: "static", project: "aicr", secret: "aicr-registry", certManager: true,
			set: []string{"certManager.enabled=true"},
		},
		"static credentials, another release, project and Secret": {
			namespace: "aicr-static", mode: "static", project: "aicr-static", secret: "my-creds",
			set: []string{"engine.project=aicr-static", "registry.auth.mode=static", "registry.auth.repoCredsSecret=my-creds"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			release := charttest.Release
			if tc.namespace != charttest.Namespace {
				release = "static-aicr-operator"
			}
			objs, err := charttest.Render(t, release, tc.namespace, append([]string{"registry.repository=" + charttest.Repository}, tc.set...)...)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range append(v1alpha1.Binaries(), kubeaccess.Setup) {
				got := chartGrants(t, objs, tc.namespace, b)
				want := neededGrants(b, tc.namespace, tc.mode, tc.project, tc.secret, release, tc.certManager, tc.bundles)
				if len(want) == 0 && b != "applier" && b != "admission" {
					t.Errorf("%s declares no needs", b)
				}
				for g := range got {
					if !want[g] {
						t.Errorf("%s: the chart grants %s, which the binary does not need (shared/kubeaccess)", b, g)
					}
				}
				for g := range want {
					if !got[g] {
						t.Errorf("%s: the chart does not grant %s, which the binary needs", b, g)
					}
				}
			}
		})
	}
}
