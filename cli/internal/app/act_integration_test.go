//go:build integration

package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/plan"
	"github.com/aicr-run/aicr-operator/testkit/testenv"

	"github.com/aicr-run/aicr-operator/cli/internal/kube"
)

// run runs the plugin with exactly args (no kubeconfig added).
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	code := Main(ctx, args, envFor(&stdout, &stderr))
	return code, stdout.String(), stderr.String()
}

// approve sets the approval as the person running the command (--as); revoke withdraws it, as
// another.
func TestApproveAndRevoke(t *testing.T) {
	env := testenv.Current(t)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	createRollout(t, dyn, removeRollout("r-approve", time.Now()))

	before := time.Now().Add(-time.Second)
	code, stdout, stderr := kubectlAs(t, env, "alice", "approve", "r-approve", "--reason", "the exporter moved into gpu-operator", "--expires", "1h")
	if code != 0 {
		t.Fatalf("approve: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "approved by alice") {
		t.Errorf("approve output %q", stdout)
	}
	a := getRollout(t, dyn, "r-approve").Spec.Approval
	switch {
	case a == nil:
		t.Fatal("no approval written")
	case a.ApprovedBy != "alice" || a.Reason != "the exporter moved into gpu-operator":
		t.Errorf("approval %+v, want alice's with the reason", a)
	case a.ApprovedAt == nil || a.ApprovedAt.Time.Before(before.Truncate(time.Second)):
		t.Errorf("approvedAt %v, want about now", a.ApprovedAt)
	case a.ExpiresAt == nil || a.ExpiresAt.Sub(a.ApprovedAt.Time) != time.Hour:
		t.Errorf("expiresAt %v, want approvedAt + 1h", a.ExpiresAt)
	}

	if code, _, stderr := kubectlAs(t, env, "bob", "approve", "r-approve", "--reason", "again"); code != 1 || !strings.Contains(stderr, "already approved by alice") {
		t.Errorf("second approve: exit %d, %q; want exit 1, already approved by alice", code, stderr)
	}
	if code, _, stderr := kubectlAs(t, env, "bob", "revoke", "r-approve"); code != 1 || !strings.Contains(stderr, "--reason is required") {
		t.Errorf("revoke without reason: exit %d, %q", code, stderr)
	}
	if code, _, stderr := kubectlAs(t, env, "bob", "revoke", "r-approve", "--reason", "wrong cluster"); code != 0 {
		t.Fatalf("revoke: exit %d: %s", code, stderr)
	}
	r := getRollout(t, dyn, "r-approve").Spec.Approval
	if r.Revoked == nil || r.Revoked.RevokedBy != "bob" || r.Revoked.Reason != "wrong cluster" || r.ApprovedBy != "alice" {
		t.Errorf("after revoke: %+v (revoked %+v)", r, r.Revoked)
	}
	code, stdout, stderr = kubectl(t, env, "approve", "r-missing", "--reason", "x")
	if code != 1 || !strings.Contains(stderr, "error: get runtimerollout r-missing: not found") || stdout != "" {
		t.Errorf("approve of a missing rollout: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, _, stderr := kubectl(t, env, "approve"); code != 2 || !strings.Contains(stderr, "missing argument") || !strings.Contains(stderr, "Run 'kubectl aicr approve --help' for usage.") {
		t.Errorf("approve without a rollout: exit %d, %q", code, stderr)
	}
}

// --token: a ServiceAccount's token, with a kubeconfig that holds no user, approves in the
// ServiceAccount's name.
func TestApproveWithAToken(t *testing.T) {
	env := testenv.Current(t)
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(env.Config)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	createRollout(t, dyn, removeRollout("r-token", time.Now()))
	ensureNamespace(t, env, "ci")
	if _, err := kc.CoreV1().ServiceAccounts("ci").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "deployer"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cli-test-approver"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{v1alpha1.Group}, Resources: []string{"runtimerollouts"}, Verbs: []string{"get", "patch"}},
	}}
	if _, err := kc.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "cli-test-approver"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "deployer", Namespace: "ci"}}}
	if _, err := kc.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tok, err := kc.CoreV1().ServiceAccounts("ci").CreateToken(ctx, "deployer", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: env.APIServerURL, CertificateAuthority: env.CAFile}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test"}
	cfg.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run(t, "approve", "r-token", "--reason", "from CI", "--kubeconfig", path, "--token", tok.Status.Token)
	if code != 0 {
		t.Fatalf("approve with --token: exit %d: %s", code, stderr)
	}
	if want := "approved by system:serviceaccount:ci:deployer"; !strings.Contains(stdout, want) {
		t.Errorf("output %q lacks %q", stdout, want)
	}
	if strings.Contains(stdout+stderr, tok.Status.Token) {
		t.Error("the token was printed")
	}
	// Without the token nobody is authenticated: an error on stderr, exit 1.
	code, _, stderr = run(t, "describe", "r-token", "--kubeconfig", path)
	if code != 1 || !strings.Contains(stderr, "error: get runtimerollout r-token") {
		t.Errorf("describe without credentials: exit %d, %q", code, stderr)
	}
}

// The connection flags reach the API server: --request-timeout bounds each request, and -n and
// --operator-namespace name the same namespace.
func TestConnectionFlags(t *testing.T) {
	env := testenv.Current(t)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	createRollout(t, dyn, removeRollout("r-flags", time.Now()))
	code, _, stderr := kubectl(t, env, "describe", "r-flags", "--request-timeout", "1ns")
	if code != 1 || !strings.Contains(stderr, "deadline exceeded") {
		t.Errorf("--request-timeout 1ns: exit %d, %q; want a timeout", code, stderr)
	}
	code, _, stderr = kubectl(t, env, "describe", "r-flags", "--request-timeout", "soon")
	if code != 1 || !strings.Contains(stderr, "error: load kubeconfig: Invalid timeout value") {
		t.Errorf("--request-timeout soon: exit %d, %q", code, stderr)
	}
	code, _, stderr = kubectl(t, env, "describe", "r-flags", "-n", "a", "--operator-namespace", "b")
	if code != 2 || !strings.Contains(stderr, `--operator-namespace "b" and --namespace "a" disagree`) {
		t.Errorf("two namespaces: exit %d, %q", code, stderr)
	}
	code, _, stderr = kubectl(t, env, "describe", "r-flags", "--context", "nowhere")
	if code != 1 || !strings.Contains(stderr, `context "nowhere" does not exist`) {
		t.Errorf("--context nowhere: exit %d, %q", code, stderr)
	}
	code, _, stderr = kubectl(t, env, "describe", "r-flags", "--no-such-flag")
	if code != 2 || !strings.Contains(stderr, "unknown flag: --no-such-flag") {
		t.Errorf("an unknown flag: exit %d, %q", code, stderr)
	}
}

// reproduce writes the plan and the inputs it came from; they re-derive the digest, and say so
// when the bundle changed since. -n and --operator-namespace both name the plans' namespace.
func TestReproduce(t *testing.T) {
	env := testenv.Current(t)
	bundle := exampleBundle(t)
	storeBundle(t, env, "gpu-stack-reproduce", bundle)
	rtObj := ensureRuntime(t, env, "gpu-stack-reproduce")
	var rt v1alpha1.ClusterRuntime
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(rtObj.Object, &rt); err != nil {
		t.Fatal(err)
	}
	p := storePlan(t, env, bundle, rt.Spec.Overrides)
	setRuntimeStatus(t, env, v1alpha1.ClusterRuntimeStatus{ActivePlan: p.Digest()})

	for _, nsFlag := range []string{"--operator-namespace", "-n"} {
		dir := filepath.Join(t.TempDir(), "out")
		code, stdout, stderr := kubectl(t, env, "reproduce", "--dir", dir, nsFlag, opNamespace)
		if code != 0 {
			t.Fatalf("reproduce %s: exit %d: %s", nsFlag, code, stderr)
		}
		if !strings.Contains(stdout, "re-derive "+p.Digest()) {
			t.Errorf("reproduce output %q does not confirm the digest", stdout)
		}
		planJSON, err := os.ReadFile(filepath.Join(dir, "plan.json"))
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(planJSON); "sha256:"+hex.EncodeToString(sum[:]) != p.Digest() {
			t.Errorf("sha256 of plan.json is not the digest %s", p.Digest())
		}
		// Anyone re-derives it from the files alone, without a cluster.
		code, pout, perr := runNoCluster(t, "plan", "--bundle", filepath.Join(dir, "bundle.yaml"), "--runtime", filepath.Join(dir, "clusterruntime.yaml"))
		if code != 0 {
			t.Fatalf("plan from the reproduced files: exit %d: %s", code, perr)
		}
		if !strings.HasPrefix(pout, "plan "+p.Digest()) {
			t.Errorf("plan from the reproduced files: %q, want digest %s", pout, p.Digest())
		}
	}
	if code, _, stderr := kubectl(t, env, "reproduce", "-n", "elsewhere", "--dir", t.TempDir()); code != 1 || !strings.Contains(stderr, "ConfigMap elsewhere/"+plan.ConfigMapName(p.Digest())+" not found") {
		t.Errorf("reproduce in another namespace: exit %d, %q", code, stderr)
	}

	// The bundle changed after the plan was made: the command says so and fails.
	storeBundle(t, env, "gpu-stack-reproduce", []byte(strings.Replace(string(bundle), "retention: 15d", "retention: 30d", 1)))
	code, _, stderr := kubectl(t, env, "reproduce", p.Digest(), "--dir", t.TempDir())
	if code != 1 || !strings.Contains(stderr, "changed after the plan was made") {
		t.Errorf("reproduce after a bundle change: exit %d, %q", code, stderr)
	}
}

// pause, resume, suspend-engine and resume-engine set the runtime's spec, and are safe to repeat.
func TestRuntimeSwitches(t *testing.T) {
	env := testenv.Current(t)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ensureRuntime(t, env, "gpu-stack")
	spec := func() v1alpha1.ClusterRuntimeSpec {
		u, err := dyn.Resource(v1alpha1.ClusterRuntimeResource).Get(context.Background(), "cluster", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var rt v1alpha1.ClusterRuntime
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &rt); err != nil {
			t.Fatal(err)
		}
		return rt.Spec
	}
	for _, step := range []struct {
		verb, want          string
		paused, suspendWant bool
	}{
		{"pause", "clusterruntime cluster paused: no new step starts", true, false},
		{"pause", "clusterruntime cluster was already paused", true, false},
		{"suspend-engine", "clusterruntime cluster engine suspended", true, true},
		{"suspend-engine", "already had the engine suspended", true, true},
		{"resume", "clusterruntime cluster resumed", false, true},
		{"resume", "was not paused", false, true},
		{"resume-engine", "clusterruntime cluster engine resumed", false, false},
		{"resume-engine", "did not have the engine suspended", false, false},
	} {
		code, stdout, stderr := kubectl(t, env, step.verb)
		if code != 0 || !strings.Contains(stdout, step.want) {
			t.Errorf("%s: exit %d, %q %q; want %q", step.verb, code, stdout, stderr, step.want)
		}
		if s := spec(); s.Paused != step.paused || s.SuspendEngine != step.suspendWant {
			t.Errorf("after %s: paused %v suspendEngine %v, want %v %v", step.verb, s.Paused, s.SuspendEngine, step.paused, step.suspendWant)
		}
	}
	if s := spec(); len(s.Overrides) != 1 {
		t.Errorf("the switches changed the rest of the spec: %+v", s)
	}
	deleteRuntime(t, env)
	if code, _, stderr := kubectl(t, env, "pause"); code != 1 || !strings.Contains(stderr, "clusterruntime cluster: not found; create it first") {
		t.Errorf("pause without a runtime: exit %d, %q", code, stderr)
	}
}

// liveApps writes the Applications of a plan into the engine namespace, as the applier would.
func liveApps(t *testing.T, env *testenv.Env, p *plan.Plan, uid string) {
	t.Helper()
	ensureNamespace(t, env, "argocd")
	dyn := dynamic.NewForConfigOrDie(env.Config)
	s := appspec.Settings{EngineNamespace: "argocd", Project: "aicr", Repository: "reg.example.com/aicr"}
	for i := range p.Releases {
		app, err := appspec.Build(s, appspec.Input{Runtime: "cluster", RuntimeUID: uid, PlanDigest: p.Digest(), Release: &p.Releases[i],
			StepID: "r-live/" + p.Releases[i].Name, StepStarted: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(app)
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			t.Fatal(err)
		}
		unstructured.RemoveNestedField(u.Object, "status")
		if _, err := dyn.Resource(kube.ApplicationResource).Namespace("argocd").Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, r := range p.Releases {
			_ = dyn.Resource(kube.ApplicationResource).Namespace("argocd").Delete(context.Background(), r.Name, metav1.DeleteOptions{})
		}
	})
}

// diff compares the live Applications with the desired plan: nothing to do when they match, each
// release's step when the plan moves, and what a bundle file would change.
func TestDiff(t *testing.T) {
	env := testenv.Current(t)
	bundle := exampleBundle(t)
	storeBundle(t, env, "gpu-stack-diff", bundle)
	rtObj := ensureRuntime(t, env, "gpu-stack-diff")
	var rt v1alpha1.ClusterRuntime
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(rtObj.Object, &rt); err != nil {
		t.Fatal(err)
	}
	active := storePlan(t, env, bundle, rt.Spec.Overrides)
	liveApps(t, env, active, string(rt.UID))
	setRuntimeStatus(t, env, v1alpha1.ClusterRuntimeStatus{ActivePlan: active.Digest(), DesiredPlan: active.Digest()})

	code, stdout, stderr := kubectl(t, env, "diff")
	if code != 0 || !strings.Contains(stdout, "no changes: the live Applications are what the plan renders (9 releases)") {
		t.Errorf("diff at the active plan: exit %d\n%s\n%s", code, stdout, stderr)
	}

	// The desired plan moves: a new retention for the Prometheus stack, dcgm-exporter gone.
	next := strings.Replace(string(bundle), "retention: 15d", "retention: 30d", 1)
	next = next[:strings.Index(next, "  # A wrapper chart")] + next[strings.Index(next, "  # Training:"):]
	desired := storePlan(t, env, []byte(next), rt.Spec.Overrides)
	setRuntimeStatus(t, env, v1alpha1.ClusterRuntimeStatus{ActivePlan: active.Digest(), DesiredPlan: desired.Digest()})
	code, stdout, stderr = kubectl(t, env, "diff")
	for _, want := range []string{
		"plan " + desired.Digest() + " (status.desiredPlan) against the live Applications in argocd:",
		"Upgrade   kube-prometheus-stack", "spec.source.helm.valuesObject",
		"Remove    dcgm-exporter",
		"7 unchanged",
		"--- live/argocd/kube-prometheus-stack\n+++ desired/argocd/kube-prometheus-stack",
		"-        retention: 15d\n+        retention: 30d",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("diff lacks %q:\n%s", want, stdout)
		}
	}
	if code != 1 {
		t.Errorf("diff with differences: exit %d, want 1 (as kubectl diff): %s", code, stderr)
	}
	checkFormatsCode(t, env, 1, []string{"diff"}, map[string]formatCase{
		"json":     {[]string{"-o", "json"}, []string{`"action": "Upgrade"`, `"release": "kube-prometheus-stack"`, `"source": "status.desiredPlan"`}},
		"yaml":     {[]string{"-o", "yaml"}, []string{"- action: Remove\n", "engineNamespace: argocd"}},
		"name":     {[]string{"-o", "name"}, []string{"application.argoproj.io/kube-prometheus-stack\napplication.argoproj.io/dcgm-exporter\n"}},
		"jsonpath": {[]string{"-o", `jsonpath={.changes[?(@.action=="Remove")].release}`}, []string{"dcgm-exporter"}},
	})

	// A bundle file: what it would do to this cluster, with the runtime's overrides.
	file := filepath.Join(t.TempDir(), "new.yaml")
	if err := os.WriteFile(file, []byte(strings.Replace(string(bundle), "retention: 15d", "retention: 7d", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = kubectl(t, env, "diff", "--bundle", file)
	if code != 1 || !strings.Contains(stdout, "--bundle "+file+" with the runtime's overrides and placement") || !strings.Contains(stdout, "+        retention: 7d") || strings.Contains(stdout, "Remove") {
		t.Errorf("diff --bundle: exit %d\n%s", code, stdout)
	}
	code, _, stderr = kubectl(t, env, "diff", "--engine-namespace", "nowhere")
	if code != 2 || !strings.Contains(stderr, "--registry-repository") {
		t.Errorf("diff where no Application is: exit %d, %q", code, stderr)
	}
}

func checkFormatsCode(t *testing.T, env *testenv.Env, wantCode int, base []string, cases map[string]formatCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := kubectl(t, env, append(append([]string{}, base...), tc.args...)...)
			if code != wantCode {
				t.Fatalf("exit %d, want %d: %s", code, wantCode, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("output lacks %q:\n%s", w, stdout)
				}
			}
		})
	}
}

// version reads the operator's version from its Deployments' labels; without access it says
// why and still succeeds.
func TestVersion(t *testing.T) {
	env := testenv.Current(t)
	ctx := context.Background()
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ensureNamespace(t, env, opNamespace)
	one := int32(1)
	for _, b := range []string{"planner", "applier"} {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "aicr-operator-" + b, Namespace: opNamespace, Labels: map[string]string{
				kube.LabelPartOf: kube.PartOfOperator, kube.LabelComponent: b, kube.LabelVersion: "0.3.1"}},
			Spec: appsv1.DeploymentSpec{Replicas: &one,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": b}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": b}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: b, Image: "ghcr.io/aicr-run/aicr-operator/" + b + ":0.3.1"}}}}},
		}
		if _, err := kc.AppsV1().Deployments(opNamespace).Create(ctx, d, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = kc.AppsV1().Deployments(opNamespace).Delete(context.Background(), d.Name, metav1.DeleteOptions{})
		})
	}
	checkFormats(t, env, []string{"version"}, map[string]formatCase{
		"text": {nil, []string{"Plugin:     dev", "Operator:   0.3.1 (namespace aicr-system)",
			"planner        0.3.1      0/1 ready, ghcr.io/aicr-run/aicr-operator/planner:0.3.1", "Kubernetes: v1."}},
		"json":     {[]string{"-o", "json"}, []string{`"version": "0.3.1"`, `"deployment": "aicr-operator-applier"`, `"platform": "`}},
		"yaml":     {[]string{"-o", "yaml"}, []string{"operator:\n  components:"}},
		"jsonpath": {[]string{"-o", "jsonpath={.operator.version}"}, []string{"0.3.1"}},
	})
	if code, stdout, _ := kubectl(t, env, "version", "--client"); code != 0 || strings.Contains(stdout, "Operator") || !strings.HasPrefix(stdout, "Plugin:") {
		t.Errorf("version --client: exit %d\n%s", code, stdout)
	}
	code, stdout, stderr := kubectl(t, env, "version", "--as", "nobody")
	if code != 0 || !strings.Contains(stdout, "Operator:   unknown (list deployments labelled app.kubernetes.io/part-of=aicr-operator in aicr-system: deployments.apps is forbidden") {
		t.Errorf("version without access: exit %d\n%s\n%s", code, stdout, stderr)
	}

	// Once the planner has written its build into the runtime's status, that is the version,
	// whatever the Deployments were labelled with.
	ensureRuntime(t, env, "aicr-bundle")
	setRuntimeStatus(t, env, v1alpha1.ClusterRuntimeStatus{Operator: &v1alpha1.OperatorBuild{Version: "v0.4.0", Revision: "0123456789abcdef"}})
	checkFormats(t, env, []string{"version"}, map[string]formatCase{
		"text": {nil, []string{"Operator:   v0.4.0 (commit 0123456789abcdef, the running planner's; namespace aicr-system)",
			"planner        0.3.1      0/1 ready"}},
		"jsonpath": {[]string{"-o", "jsonpath={.operator.version} {.operator.running.revision}"}, []string{"v0.4.0 0123456789abcdef"}},
	})
}

// completion prints a script per shell, and completes rollout names and plan digests from the
// cluster with the connection flags typed.
func TestCompletion(t *testing.T) {
	env := testenv.Current(t)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	createRollout(t, dyn, removeRollout("r-complete-1", time.Now()))
	createRollout(t, dyn, removeRollout("r-complete-2", time.Now()))
	p := storePlan(t, env, exampleBundle(t), nil)
	for shell, want := range map[string]string{"bash": "__start_kubectl-aicr", "zsh": "#compdef kubectl-aicr", "fish": "complete -c kubectl-aicr", "powershell": "Register-ArgumentCompleter"} {
		code, stdout, stderr := kubectl(t, env, "completion", shell)
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("completion %s: exit %d, lacks %q: %s", shell, code, want, stderr)
		}
	}
	if code, _, stderr := kubectl(t, env, "completion", "tcsh"); code != 2 || !strings.Contains(stderr, "use bash, zsh, fish or powershell") {
		t.Errorf("completion tcsh: exit %d, %q", code, stderr)
	}
	for _, cmd := range []string{"describe", "graph", "approve", "revoke", "wait"} {
		_, stdout, _ := run(t, "__complete", cmd, "--kubeconfig", env.Kubeconfig, "r-complete")
		if !strings.Contains(stdout, "r-complete-1\tAwaitingApproval, step 1/2 gpu-operator (Upgrade)\n") || !strings.Contains(stdout, "r-complete-2\t") {
			t.Errorf("__complete %s: %q", cmd, stdout)
		}
	}
	if _, stdout, _ := run(t, "__complete", "reproduce", "--kubeconfig", env.Kubeconfig, "sha256:"); !strings.Contains(stdout, p.Digest()+"\n") {
		t.Errorf("__complete reproduce: %q", stdout)
	}
	if _, stdout, _ := run(t, "__complete", "status", "--kubeconfig", env.Kubeconfig, "--context", ""); !strings.Contains(stdout, "aicr-testenv\n") {
		t.Errorf("__complete --context: %q", stdout)
	}
	if _, stdout, _ := run(t, "__complete", "graph", "-o", ""); !strings.Contains(stdout, "mermaid\n") || !strings.Contains(stdout, "jsonpath=\n") {
		t.Errorf("__complete -o: %q", stdout)
	}
}
