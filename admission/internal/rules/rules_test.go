package rules

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

const (
	applier  = "system:serviceaccount:aicr-system:aicr-operator-applier"
	planner  = "system:serviceaccount:aicr-system:aicr-operator-planner"
	alice    = "alice@example.com"
	bob      = "bob@example.com"
	engineNS = "argocd"
	opNS     = "aicr-system"
)

var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func newValidator(cms ...*corev1.ConfigMap) *Validator {
	return New(Config{
		OperatorIdentities: []string{applier, " " + planner + " "},
		Namespace:          opNS,
		EngineNamespace:    engineNS,
		Bundles:            fakeConfigMaps(cms),
		Rollouts:           testRollouts,
		Clock:              clocktesting.NewFakePassiveClock(now),
	})
}

// fakeRollouts serves RuntimeRollouts by name, NotFound otherwise.
type fakeRollouts map[string]*v1alpha1.RuntimeRollout

func (f fakeRollouts) GetRollout(_ context.Context, name string) (*v1alpha1.RuntimeRollout, error) {
	if r, ok := f[name]; ok {
		return r.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(v1alpha1.RuntimeRolloutResource.GroupResource(), name)
}

// testRollouts: r-7f3a is removing gpu-operator; r-other removes another release; r-ended
// removed gpu-operator and failed.
var testRollouts = fakeRollouts{
	"r-7f3a":  removingRollout("r-7f3a", v1alpha1.PhaseProgressing, "gpu-operator"),
	"r-other": removingRollout("r-other", v1alpha1.PhaseProgressing, "nfd"),
	"r-ended": removingRollout("r-ended", v1alpha1.PhaseFailed, "gpu-operator"),
}

func removingRollout(name string, phase v1alpha1.RolloutPhase, release string) *v1alpha1.RuntimeRollout {
	return &v1alpha1.RuntimeRollout{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1alpha1.RuntimeRolloutStatus{Phase: phase,
		Steps: []v1alpha1.Step{{Index: 1, Release: release, Action: v1alpha1.ActionRemove, State: v1alpha1.StepInProgress}}}}
}

// fakeConfigMaps serves ConfigMaps from a list, NotFound otherwise.
type fakeConfigMaps []*corev1.ConfigMap

func (f fakeConfigMaps) GetConfigMap(_ context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	for _, cm := range f {
		if cm.Namespace == namespace && cm.Name == name {
			return cm, nil
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func raw(t *testing.T, obj any) runtime.RawExtension {
	t.Helper()
	if obj == nil {
		return runtime.RawExtension{}
	}
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: data}
}

// review is one request: its resource, operation, user and objects (nil for none).
type review struct {
	resource  schema.GroupVersionResource
	op        admissionv1.Operation
	user      string
	namespace string
	name      string
	sub       string
	obj, old  any
}

func (r review) request(t *testing.T) *admissionv1.AdmissionRequest {
	t.Helper()
	return &admissionv1.AdmissionRequest{
		UID:         "uid-1",
		Resource:    metav1.GroupVersionResource(r.resource),
		Operation:   r.op,
		UserInfo:    authenticationv1.UserInfo{Username: r.user},
		Namespace:   r.namespace,
		Name:        r.name,
		SubResource: r.sub,
		Object:      raw(t, r.obj),
		OldObject:   raw(t, r.old),
	}
}

var applicationsGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}

// app is an Application as the API server sends it, with options applied to its metadata.
func app(opts ...func(*application)) *application {
	a := &application{
		TypeMeta: metav1.TypeMeta{APIVersion: "argoproj.io/v1alpha1", Kind: "Application"},
		Metadata: metav1.ObjectMeta{Name: "gpu-operator", Namespace: engineNS,
			Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}},
		Spec: map[string]any{"project": "aicr", "source": map[string]any{"targetRevision": "sha256:1"}},
	}
	for _, o := range opts {
		o(a)
	}
	return a
}

func withFinalizer(a *application) {
	a.Metadata.Finalizers = append(a.Metadata.Finalizers, v1alpha1.ArgoResourcesFinalizer)
}

func withDeleteRollout(a *application) { withMarker("r-7f3a")(a) }

// withMarker sets the delete-rollout marker to name a rollout.
func withMarker(rollout string) func(*application) {
	return func(a *application) {
		if a.Metadata.Annotations == nil {
			a.Metadata.Annotations = map[string]string{}
		}
		a.Metadata.Annotations[v1alpha1.AnnotationDeleteRollout] = rollout
	}
}

func unlabelled(a *application) { a.Metadata.Labels = nil }

func withStatus(a *application) { a.Spec = app().Spec } // same spec, as Argo CD's status writes leave it

func withRevision(rev string) func(*application) {
	return func(a *application) {
		a.Spec = map[string]any{"project": "aicr", "source": map[string]any{"targetRevision": rev}}
	}
}

const finalizerMessage = "Application argocd/gpu-operator carries the finalizer resources-finalizer.argocd.argoproj.io without the annotation operator.aicr.run/delete-rollout, " +
	"so the operator (" + applier + ") may not write or delete it: deleting it would delete the release's resources. " +
	"Remove the finalizer to let the operator manage the Application again; to remove the component, take it out of the ClusterRuntime's plan"

// markerMessage is the denial of a write with a delete-rollout marker no Remove step backs.
func markerMessage(why string) string {
	return "Application argocd/gpu-operator carries the finalizer resources-finalizer.argocd.argoproj.io and the annotation operator.aicr.run/delete-rollout=" + why +
		", so the operator (" + applier + ") may not write or delete it: deleting it would delete the release's resources. " +
		"Remove the finalizer to let the operator manage the Application again; to remove the component, take it out of the ClusterRuntime's plan"
}

const managedByWarning = "metadata.labels[app.kubernetes.io/managed-by]=aicr-operator: the operator forces this Application's spec back, " +
	"or treats it as foreign if it did not create it; change the ClusterRuntime instead"

func denied(rule, field, message string) Decision {
	return Decision{Violations: []Violation{{Rule: rule, Field: field, Message: message}}, Code: 403}
}

// TestApplicationRules proves that the operator cannot write or delete an Application that
// someone armed with the resources finalizer, except in the approved Remove sequence, and that
// a person editing an operator-labelled Application is warned, never denied.
func TestApplicationRules(t *testing.T) {
	t.Parallel()
	finalizerDenied := denied(RuleApplicationFinalizer, "metadata.finalizers", finalizerMessage)
	warned := Decision{Warnings: []string{managedByWarning}, WarningRules: []string{RuleApplicationManagedBy}}
	cases := map[string]struct {
		review review
		want   Decision
	}{
		"the operator updates an Application without the finalizer": {
			review: review{op: admissionv1.Update, user: applier, obj: app(withRevision("sha256:2")), old: app()},
		},
		"the operator updates an Application a person armed with the finalizer": {
			review: review{op: admissionv1.Update, user: applier, obj: app(withFinalizer, withRevision("sha256:2")), old: app(withFinalizer)},
			want:   finalizerDenied,
		},
		"the operator's write would strip a finalizer a person added": {
			review: review{op: admissionv1.Update, user: applier, obj: app(), old: app(withFinalizer)},
			want:   finalizerDenied,
		},
		"the operator adds the finalizer without the delete-rollout annotation": {
			review: review{op: admissionv1.Update, user: applier, obj: app(withFinalizer), old: app()},
			want:   finalizerDenied,
		},
		"the operator creates an Application carrying the finalizer": {
			review: review{op: admissionv1.Create, user: applier, obj: app(withFinalizer)},
			want:   finalizerDenied,
		},
		"the operator deletes an armed Application": {
			review: review{op: admissionv1.Delete, user: applier, old: app(withFinalizer)},
			want:   finalizerDenied,
		},
		"the Remove step adds the finalizer with the delete-rollout annotation": {
			review: review{op: admissionv1.Update, user: applier, obj: app(withFinalizer, withDeleteRollout), old: app()},
		},
		"the Remove step annotates an Application a person armed": {
			review: review{op: admissionv1.Update, user: applier, obj: app(withFinalizer, withDeleteRollout), old: app(withFinalizer)},
		},
		"the Remove step deletes the annotated Application": {
			review: review{op: admissionv1.Delete, user: applier, old: app(withFinalizer, withDeleteRollout)},
		},
		"a hand-set marker naming no rollout: the operator's write is denied": {
			review: review{op: admissionv1.Update, user: applier, obj: app(withFinalizer, withMarker("by-hand"), withRevision("sha256:2")), old: app(withFinalizer, withMarker("by-hand"))},
			want:   denied(RuleApplicationFinalizer, "metadata.finalizers", markerMessage("by-hand, but rollout by-hand does not exist")),
		},
		"a hand-set marker naming a rollout that removes another release: the delete is denied": {
			review: review{op: admissionv1.Delete, user: applier, old: app(withFinalizer, withMarker("r-other"))},
			want: denied(RuleApplicationFinalizer, "metadata.finalizers",
				markerMessage("r-other, but rollout r-other is not removing gpu-operator (set by hand, or its rollout ended)")),
		},
		"a marker left by a Remove whose rollout ended: the write is denied": {
			review: review{op: admissionv1.Update, user: applier, obj: app(withFinalizer, withMarker("r-ended")), old: app(withFinalizer, withMarker("r-ended"))},
			want: denied(RuleApplicationFinalizer, "metadata.finalizers",
				markerMessage("r-ended, but rollout r-ended is not removing gpu-operator (set by hand, or its rollout ended)")),
		},
		"a hand-set marker without the finalizer: nothing to guard": {
			review: review{op: admissionv1.Update, user: applier, obj: app(withMarker("by-hand"), withRevision("sha256:2")), old: app(withMarker("by-hand"))},
		},
		"the operator deletes an Application without the finalizer": {
			review: review{op: admissionv1.Delete, user: applier, old: app()},
		},
		"an Application outside the engine namespace is not the operator's": {
			review: review{op: admissionv1.Update, user: applier, namespace: "team-a", obj: app(withFinalizer), old: app(withFinalizer)},
		},
		"a person adds the finalizer: allowed, and not warned as the spec is unchanged": {
			review: review{op: admissionv1.Update, user: alice, obj: app(withFinalizer), old: app()},
		},
		"a person creates an Application with the operator's label": {
			review: review{op: admissionv1.Create, user: alice, obj: app()},
			want:   warned,
		},
		"a person changes the spec of an operator-labelled Application": {
			review: review{op: admissionv1.Update, user: alice, obj: app(withRevision("sha256:9")), old: app()},
			want:   warned,
		},
		"Argo CD writes status and operation, leaving the spec alone": {
			review: review{op: admissionv1.Update, user: "system:serviceaccount:argocd:argocd-application-controller", obj: app(withStatus), old: app()},
		},
		"a person creates an Application of their own": {
			review: review{op: admissionv1.Create, user: alice, obj: app(unlabelled)},
		},
		"a person deletes an armed Application": {
			review: review{op: admissionv1.Delete, user: alice, old: app(withFinalizer)},
		},
	}
	v := newValidator()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := tc.review
			r.resource = applicationsGVR
			r.name = "gpu-operator"
			if r.namespace == "" {
				r.namespace = engineNS
			}
			got := v.Validate(t.Context(), r.request(t))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

// TestManagedByWarningFitsKubernetes keeps the warning under the 256 characters Kubernetes may
// truncate at.
func TestManagedByWarningFitsKubernetes(t *testing.T) {
	if n := len(managedByWarning); n > 256 {
		t.Errorf("warning is %d characters; Kubernetes may truncate past 256", n)
	}
}

var rolloutsGVR = v1alpha1.RuntimeRolloutResource

func ts(d time.Duration) *metav1.Time {
	t := metav1.NewTime(now.Add(d).Truncate(time.Second))
	return &t
}

func rollout(a *v1alpha1.Approval) *v1alpha1.RuntimeRollout {
	return &v1alpha1.RuntimeRollout{
		TypeMeta:   metav1.TypeMeta{APIVersion: "operator.aicr.run/v1alpha1", Kind: "RuntimeRollout"},
		ObjectMeta: metav1.ObjectMeta{Name: "r-7f3a"},
		Spec:       v1alpha1.RuntimeRolloutSpec{Runtime: "cluster", RuntimeUID: "u1", ToDigest: "sha256:2", Approval: a},
	}
}

func approval(by string, opts ...func(*v1alpha1.Approval)) *v1alpha1.Approval {
	a := &v1alpha1.Approval{ApprovedBy: by, Reason: "remove the old exporter", ApprovedAt: ts(0), ExpiresAt: ts(time.Hour)}
	for _, o := range opts {
		o(a)
	}
	return a
}

func revokedBy(by, reason string) func(*v1alpha1.Approval) {
	return func(a *v1alpha1.Approval) {
		a.Revoked = &v1alpha1.Revocation{RevokedBy: by, Reason: reason, RevokedAt: ts(time.Minute)}
	}
}

func reason(r string) func(*v1alpha1.Approval) { return func(a *v1alpha1.Approval) { a.Reason = r } }

func expires(at *metav1.Time) func(*v1alpha1.Approval) {
	return func(a *v1alpha1.Approval) { a.ExpiresAt = at }
}

const (
	setOnceMessage   = "cannot change once the approval is set; revoke the approval instead (kubectl aicr revoke ROLLOUT --reason TEXT)"
	operatorApproves = "the operator (" + planner + ") may never set, change or revoke an approval; a person approves with kubectl aicr approve and revokes with kubectl aicr revoke"
)

// TestRolloutApprovalRules proves that an approval is set once, by a person, in their own name,
// with a reason of at most 1024 characters and an expiry not in the past, and that a
// revocation is set once with a reason; and that the operator can never touch either.
func TestRolloutApprovalRules(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		review review
		want   Decision
	}{
		"the operator creates a rollout without an approval": {
			review: review{op: admissionv1.Create, user: planner, obj: rollout(nil)},
		},
		"the operator creates a rollout with an approval": {
			review: review{op: admissionv1.Create, user: planner, obj: rollout(approval(planner))},
			want:   denied(RuleRolloutApproval, "spec.approval", operatorApproves),
		},
		"the operator approves a rollout": {
			review: review{op: admissionv1.Update, user: planner, obj: rollout(approval(alice)), old: rollout(nil)},
			want:   denied(RuleRolloutApproval, "spec.approval", operatorApproves),
		},
		"the operator revokes an approval": {
			review: review{op: admissionv1.Update, user: planner, obj: rollout(approval(alice, revokedBy(planner, "deadline"))), old: rollout(approval(alice))},
			want:   denied(RuleRolloutApproval, "spec.approval", operatorApproves),
		},
		"the operator updates an approved rollout leaving the approval alone": {
			review: review{op: admissionv1.Update, user: planner, obj: rollout(approval(alice)), old: rollout(approval(alice))},
		},
		"a person approves in their own name": {
			review: review{op: admissionv1.Update, user: alice, obj: rollout(approval(alice)), old: rollout(nil)},
		},
		"a person approves without an expiry": {
			review: review{op: admissionv1.Update, user: alice, obj: rollout(approval(alice, expires(nil))), old: rollout(nil)},
		},
		"a person approves in another's name": {
			review: review{op: admissionv1.Update, user: alice, obj: rollout(approval(bob)), old: rollout(nil)},
			want: denied(RuleRolloutApproval, "spec.approval.approvedBy",
				`must be your own username "alice@example.com" (got "bob@example.com"): nobody approves or revokes in another's name, and admission cannot fill it in for you`),
		},
		"a person approves without a reason": {
			review: review{op: admissionv1.Update, user: alice, obj: rollout(approval(alice, reason("  "))), old: rollout(nil)},
			want:   denied(RuleRolloutApproval, "spec.approval.reason", "an approval needs a reason: say why the rollout's Remove steps may run"),
		},
		"a reason of 1024 characters is accepted": {
			review: review{op: admissionv1.Update, user: alice, obj: rollout(approval(alice, reason(strings.Repeat("é", 1024)))), old: rollout(nil)},
		},
		"a reason of 1025 characters is refused": {
			review: review{op: admissionv1.Update, user: alice, obj: rollout(approval(alice, reason(strings.Repeat("é", 1025)))), old: rollout(nil)},
			want:   denied(RuleRolloutApproval, "spec.approval.reason", "is 1025 characters; at most 1024 are accepted"),
		},
		"an approval that expired already": {
			review: review{op: admissionv1.Update, user: alice, obj: rollout(approval(alice, expires(ts(-time.Minute)))), old: rollout(nil)},
			want: denied(RuleRolloutApproval, "spec.approval.expiresAt",
				"2026-05-01T11:59:00Z is in the past (now 2026-05-01T12:00:00Z); set a later time, or leave it empty to use the rollout's deadline"),
		},
		"an approval created with the rollout by a person is checked too": {
			review: review{op: admissionv1.Create, user: alice, obj: rollout(approval(bob))},
			want: denied(RuleRolloutApproval, "spec.approval.approvedBy",
				`must be your own username "alice@example.com" (got "bob@example.com"): nobody approves or revokes in another's name, and admission cannot fill it in for you`),
		},
		"every problem is reported at once": {
			review: review{op: admissionv1.Update, user: alice, obj: rollout(approval(bob, reason(""))), old: rollout(nil)},
			want: Decision{Code: 403, Violations: []Violation{
				{Rule: RuleRolloutApproval, Field: "spec.approval.approvedBy", Message: `must be your own username "alice@example.com" (got "bob@example.com"): nobody approves or revokes in another's name, and admission cannot fill it in for you`},
				{Rule: RuleRolloutApproval, Field: "spec.approval.reason", Message: "an approval needs a reason: say why the rollout's Remove steps may run"},
			}},
		},
		"a person changes the reason of an approval": {
			review: review{op: admissionv1.Update, user: alice, obj: rollout(approval(alice, reason("other"))), old: rollout(approval(alice))},
			want:   denied(RuleRolloutApproval, "spec.approval.reason", setOnceMessage),
		},
		"a person re-approves in their own name over another's approval": {
			review: review{op: admissionv1.Update, user: bob, obj: rollout(approval(bob)), old: rollout(approval(alice))},
			want:   denied(RuleRolloutApproval, "spec.approval.approvedBy", setOnceMessage),
		},
		"a person extends the expiry": {
			review: review{op: admissionv1.Update, user: alice, obj: rollout(approval(alice, expires(ts(2*time.Hour)))), old: rollout(approval(alice))},
			want:   denied(RuleRolloutApproval, "spec.approval.expiresAt", setOnceMessage),
		},
		"a person removes an approval": {
			review: review{op: admissionv1.Update, user: alice, obj: rollout(nil), old: rollout(approval(alice))},
			want: denied(RuleRolloutApproval, "spec.approval",
				"an approval cannot be removed once set; revoke it instead with kubectl aicr revoke ROLLOUT --reason TEXT"),
		},
		"a person revokes in their own name with a reason": {
			review: review{op: admissionv1.Update, user: bob, obj: rollout(approval(alice, revokedBy(bob, "wrong cluster"))), old: rollout(approval(alice))},
		},
		"a revocation of an approval that has since expired is accepted": {
			review: review{op: admissionv1.Update, user: bob,
				obj: rollout(approval(alice, expires(ts(-time.Hour)), revokedBy(bob, "too late"))), old: rollout(approval(alice, expires(ts(-time.Hour))))},
		},
		"a revocation without a reason": {
			review: review{op: admissionv1.Update, user: bob, obj: rollout(approval(alice, revokedBy(bob, ""))), old: rollout(approval(alice))},
			want:   denied(RuleRolloutApproval, "spec.approval.revoked.reason", "a revocation needs a reason: say why the approval is withdrawn"),
		},
		"a revocation in another's name": {
			review: review{op: admissionv1.Update, user: bob, obj: rollout(approval(alice, revokedBy(alice, "oops"))), old: rollout(approval(alice))},
			want: denied(RuleRolloutApproval, "spec.approval.revoked.revokedBy",
				`must be your own username "bob@example.com" (got "alice@example.com"): nobody approves or revokes in another's name, and admission cannot fill it in for you`),
		},
		"a revocation with a reason over 1024 characters": {
			review: review{op: admissionv1.Update, user: bob, obj: rollout(approval(alice, revokedBy(bob, strings.Repeat("x", 2000)))), old: rollout(approval(alice))},
			want:   denied(RuleRolloutApproval, "spec.approval.revoked.reason", "is 2000 characters; at most 1024 are accepted"),
		},
		"a revocation cannot be withdrawn": {
			review: review{op: admissionv1.Update, user: bob, obj: rollout(approval(alice)), old: rollout(approval(alice, revokedBy(bob, "wrong cluster")))},
			want:   denied(RuleRolloutApproval, "spec.approval.revoked", "a revocation is set once and cannot be changed or removed"),
		},
		"a person edits a rollout without touching the approval": {
			review: review{op: admissionv1.Update, user: alice, obj: rollout(approval(alice)), old: rollout(approval(alice))},
		},
		"a deletion is not this rule's business": {
			review: review{op: admissionv1.Delete, user: alice, old: rollout(approval(alice))},
		},
		"the status subresource is not checked": {
			review: review{op: admissionv1.Update, user: planner, sub: "status", obj: rollout(approval(alice)), old: rollout(nil)},
		},
	}
	v := newValidator()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := tc.review
			r.resource = rolloutsGVR
			r.name = "r-7f3a"
			got := v.Validate(t.Context(), r.request(t))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

const testDigest = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

const testBundle = `apiVersion: bundle.aicr.run/v1alpha1
kind: Bundle
metadata: {name: gpu-stack, version: 1.2.0}
components:
  - name: gpu-operator
    chart: {path: charts/gpu-operator, digest: ` + testDigest + `}
    namespace: gpu-operator
    values: {driver: {version: "580.65.06"}}
`

func bundleConfigMap(namespace, name, key, doc string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: map[string]string{key: doc}}
}

func runtimeObj(opts ...func(*v1alpha1.ClusterRuntime)) *v1alpha1.ClusterRuntime {
	rt := &v1alpha1.ClusterRuntime{
		TypeMeta:   metav1.TypeMeta{APIVersion: "operator.aicr.run/v1alpha1", Kind: "ClusterRuntime"},
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.RuntimeName},
		Spec: v1alpha1.ClusterRuntimeSpec{
			Bundle: v1alpha1.BundleSource{ConfigMap: &v1alpha1.ConfigMapBundleSource{Name: "gpu-bundle"}},
		},
	}
	for _, o := range opts {
		o(rt)
	}
	return rt
}

func named(n string) func(*v1alpha1.ClusterRuntime) {
	return func(rt *v1alpha1.ClusterRuntime) { rt.Name = n }
}

func withCleanup(rt *v1alpha1.ClusterRuntime) {
	rt.Finalizers = append(rt.Finalizers, v1alpha1.RuntimeFinalizer)
}

func paused(rt *v1alpha1.ClusterRuntime) { rt.Spec.Paused = true }

func override(component, path, value string) func(*v1alpha1.ClusterRuntime) {
	return func(rt *v1alpha1.ClusterRuntime) {
		rt.Spec.Overrides = append(rt.Spec.Overrides, v1alpha1.Override{Component: component, Path: path, Value: apiextensionsv1.JSON{Raw: []byte(value)}})
	}
}

func bundleRef(ns, name, key string) func(*v1alpha1.ClusterRuntime) {
	return func(rt *v1alpha1.ClusterRuntime) {
		rt.Spec.Bundle.ConfigMap = &v1alpha1.ConfigMapBundleSource{Namespace: ns, Name: name, Key: key}
	}
}

func deleting(rt *v1alpha1.ClusterRuntime) {
	t := metav1.NewTime(now)
	rt.DeletionTimestamp = &t
}

// TestClusterRuntimeRules proves that a ClusterRuntime must be named cluster, that its spec must
// resolve with the bundle it names (each failure at its field path), that the operator never
// writes the spec, and that only the operator moves its cleanup finalizer.
func TestClusterRuntimeRules(t *testing.T) {
	t.Parallel()
	good := bundleConfigMap(opNS, "gpu-bundle", v1alpha1.DefaultBundleKey, testBundle)
	elsewhere := bundleConfigMap("stacks", "gpu", "stack.yaml", testBundle)
	broken := bundleConfigMap(opNS, "broken", v1alpha1.DefaultBundleKey, strings.Replace(testBundle, "charts/gpu-operator", "https://charts.example.com/gpu-operator", 1))
	forbiddenNS := bundleConfigMap(opNS, "in-argocd", v1alpha1.DefaultBundleKey, strings.Replace(testBundle, "namespace: gpu-operator", "namespace: argocd", 1))
	cases := map[string]struct {
		review review
		want   Decision
	}{
		"an admin creates a runtime whose bundle resolves": {
			review: review{op: admissionv1.Create, user: alice, obj: runtimeObj(override("gpu-operator", "driver.version", `"590.1"`))},
		},
		"a bundle in another namespace under another key": {
			review: review{op: admissionv1.Create, user: alice, obj: runtimeObj(bundleRef("stacks", "gpu", "stack.yaml"))},
		},
		"a runtime not named cluster": {
			review: review{op: admissionv1.Create, user: alice, obj: runtimeObj(named("prod"))},
			want:   denied(RuleRuntimeName, "metadata.name", `the ClusterRuntime is a singleton and must be named "cluster" (got "prod")`),
		},
		"an override of a path the bundle does not declare": {
			review: review{op: admissionv1.Update, user: alice, old: runtimeObj(),
				obj: runtimeObj(override("gpu-operator", "driver.version", `"590.1"`), override("gpu-operator", "driver.versoin", `"590.1"`))},
			want: denied(RuleRuntimeResolves, "spec.overrides[1].path",
				`component gpu-operator: driver has no key "versoin" (keys: version); an override may only change a value the bundle declares`),
		},
		"an override of a component the bundle does not have": {
			review: review{op: admissionv1.Create, user: alice, obj: runtimeObj(override("gpu-operater", "driver.version", `"1"`))},
			want: denied(RuleRuntimeResolves, "spec.overrides[0].component",
				`no component "gpu-operater" in bundle gpu-stack 1.2.0 (components: gpu-operator)`),
		},
		"no bundle source": {
			review: review{op: admissionv1.Create, user: alice, obj: runtimeObj(func(rt *v1alpha1.ClusterRuntime) { rt.Spec.Bundle.ConfigMap = nil })},
			want: denied(RuleRuntimeResolves, "spec.bundle",
				"a bundle source is required: set spec.bundle.configMap.name to the ConfigMap that holds the bundle, or spec.bundle.oci (repository and digest) to a bundle pushed with kubectl aicr bundle push"),
		},
		"an OCI bundle is left to the planner, which holds the registry credentials": {
			review: review{op: admissionv1.Create, user: alice, obj: runtimeObj(func(rt *v1alpha1.ClusterRuntime) {
				rt.Spec.Bundle = v1alpha1.BundleSource{OCI: &v1alpha1.OCIBundleSource{
					Repository: "registry.example.com/aicr/bundles/gpu-stack", Digest: "sha256:" + strings.Repeat("c", 64)}}
			})},
		},
		"a bundle ConfigMap that does not exist": {
			review: review{op: admissionv1.Create, user: alice, obj: runtimeObj(bundleRef("", "missing", ""))},
			want: denied(RuleRuntimeResolves, "spec.bundle.configMap.name",
				`ConfigMap aicr-system/missing not found: create it with the bundle under key "bundle.yaml", or name an existing ConfigMap`),
		},
		"a bundle ConfigMap without the key": {
			review: review{op: admissionv1.Create, user: alice, obj: runtimeObj(bundleRef("", "gpu-bundle", "stack.yaml"))},
			want: denied(RuleRuntimeResolves, "spec.bundle.configMap.key",
				`ConfigMap aicr-system/gpu-bundle has no key "stack.yaml" (its keys: bundle.yaml); set spec.bundle.configMap.key to the key that holds the bundle`),
		},
		"a bundle that does not parse": {
			review: review{op: admissionv1.Create, user: alice, obj: runtimeObj(bundleRef("", "broken", ""))},
			want: denied(RuleRuntimeResolves, "spec.bundle.configMap",
				`the bundle in ConfigMap aicr-system/broken key "bundle.yaml" does not resolve: components[0].chart.path: "https://charts.example.com/gpu-operator" is not supported: charts come only from registry.repository, as charts/<name> or wrappers/<name>; fix the bundle or name another`),
		},
		"a bundle that puts a component in the engine namespace": {
			review: review{op: admissionv1.Create, user: alice, obj: runtimeObj(bundleRef("", "in-argocd", ""))},
			want: denied(RuleRuntimeResolves, "spec.bundle.configMap",
				`the bundle in ConfigMap aicr-system/in-argocd key "bundle.yaml" does not resolve: components[0].namespace: namespace "argocd" is not allowed for a component (reserved: aicr-system, argocd, default, kube-node-lease, kube-public, kube-system); use a namespace of the component's own; fix the bundle or name another`),
		},
		"an update that leaves the spec alone does not re-read the bundle": {
			review: review{op: admissionv1.Update, user: alice, old: runtimeObj(bundleRef("", "missing", "")),
				obj: runtimeObj(bundleRef("", "missing", ""), func(rt *v1alpha1.ClusterRuntime) { rt.Labels = map[string]string{"team": "gpu"} })},
		},
		"the operator adds its finalizer": {
			review: review{op: admissionv1.Update, user: planner, old: runtimeObj(), obj: runtimeObj(withCleanup)},
		},
		"the operator removes its finalizer while the runtime is deleted": {
			review: review{op: admissionv1.Update, user: planner, old: runtimeObj(withCleanup, deleting), obj: runtimeObj(deleting)},
		},
		"the operator adds its finalizer though the bundle has gone since": {
			review: review{op: admissionv1.Update, user: planner, old: runtimeObj(bundleRef("", "missing", "")), obj: runtimeObj(bundleRef("", "missing", ""), withCleanup)},
		},
		"a person removes the operator's finalizer": {
			review: review{op: admissionv1.Update, user: alice, old: runtimeObj(withCleanup, deleting), obj: runtimeObj(deleting)},
			want: denied(RuleRuntimeFinalizer, "metadata.finalizers",
				`only the operator adds or removes the finalizer operator.aicr.run/cleanup, and "alice@example.com" may not remove it: leave it to the operator (if the operator is uninstalled, see docs/admission.md)`),
		},
		"a person creates the runtime with the operator's finalizer": {
			review: review{op: admissionv1.Create, user: alice, obj: runtimeObj(withCleanup)},
			want: denied(RuleRuntimeFinalizer, "metadata.finalizers",
				`only the operator adds or removes the finalizer operator.aicr.run/cleanup, and "alice@example.com" may not add it: leave it to the operator (if the operator is uninstalled, see docs/admission.md)`),
		},
		"the operator writes the spec": {
			review: review{op: admissionv1.Update, user: planner, old: runtimeObj(), obj: runtimeObj(paused)},
			want: denied(RuleRuntimeSpecOwner, "spec",
				"the operator ("+planner+") may not write a ClusterRuntime's spec: it belongs to the platform admin"),
		},
		"a person pauses the runtime": {
			review: review{op: admissionv1.Update, user: alice, old: runtimeObj(withCleanup), obj: runtimeObj(withCleanup, paused)},
		},
		"a deletion is allowed": {
			review: review{op: admissionv1.Delete, user: alice, old: runtimeObj(withCleanup)},
		},
	}
	v := newValidator(good, elsewhere, broken, forbiddenNS)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := tc.review
			r.resource = v1alpha1.ClusterRuntimeResource
			r.name = v1alpha1.RuntimeName
			got := v.Validate(t.Context(), r.request(t))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

func planConfigMap(t *testing.T, opts ...func(*corev1.ConfigMap)) *corev1.ConfigMap {
	t.Helper()
	b, err := plan.ParseBundle([]byte(testBundle))
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Resolve(b, plan.Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	cm, err := p.ConfigMap(opNS)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range opts {
		o(cm)
	}
	return cm
}

// TestPlanConfigMapRules proves that a plan's content, role label and digest annotation never
// change, that a new plan's content must match its digest, and that only the operator deletes
// a plan.
func TestPlanConfigMapRules(t *testing.T) {
	t.Parallel()
	cm := planConfigMap(t)
	digest := cm.Annotations[v1alpha1.AnnotationPlanDigest]
	immutable := "cannot change: plan " + digest + " is immutable, because rollouts and Applications refer to it by digest; change the ClusterRuntime and the operator writes a new plan"
	cases := map[string]struct {
		review review
		want   Decision
	}{
		"the operator creates a plan": {
			review: review{op: admissionv1.Create, user: planner, obj: cm},
		},
		"a plan whose content does not match its digest": {
			review: review{op: admissionv1.Create, user: alice, obj: planConfigMap(t, func(c *corev1.ConfigMap) {
				c.Annotations[v1alpha1.AnnotationPlanDigest] = "sha256:" + strings.Repeat("0", 64)
			})},
			want: denied(RulePlanImmutable, "metadata.annotations[operator.aicr.run/plan-digest]",
				"read plan aicr-system/"+cm.Name+": decode plan: content digest "+digest+" does not match sha256:"+strings.Repeat("0", 64)+
					"; a plan ConfigMap's plan.json must be the plan whose digest it is named by (the operator writes plans; nobody else needs to)"),
		},
		"the operator relabels a plan (other labels may change)": {
			review: review{op: admissionv1.Update, user: planner, old: cm, obj: planConfigMap(t, func(c *corev1.ConfigMap) { c.Labels["team"] = "gpu" })},
		},
		"a person edits a plan's data": {
			review: review{op: admissionv1.Update, user: alice, old: cm, obj: planConfigMap(t, func(c *corev1.ConfigMap) { c.Data["extra"] = "x" })},
			want:   denied(RulePlanImmutable, "data", immutable),
		},
		"the operator edits a plan's binaryData": {
			review: review{op: admissionv1.Update, user: planner, old: cm, obj: planConfigMap(t, func(c *corev1.ConfigMap) { c.BinaryData = map[string][]byte{"x": {1}} })},
			want:   denied(RulePlanImmutable, "binaryData", immutable),
		},
		"a person removes the role label and the digest": {
			review: review{op: admissionv1.Update, user: alice, old: cm, obj: planConfigMap(t, func(c *corev1.ConfigMap) {
				delete(c.Labels, v1alpha1.LabelRole)
				delete(c.Annotations, v1alpha1.AnnotationPlanDigest)
			})},
			want: Decision{Code: 403, Violations: []Violation{
				{Rule: RulePlanImmutable, Field: "metadata.labels[operator.aicr.run/role]", Message: immutable},
				{Rule: RulePlanImmutable, Field: "metadata.annotations[operator.aicr.run/plan-digest]", Message: immutable},
			}},
		},
		"the operator deletes a plan": {
			review: review{op: admissionv1.Delete, user: planner, old: cm},
		},
		"a person deletes a plan": {
			review: review{op: admissionv1.Delete, user: alice, old: cm},
			want: denied(RulePlanDelete, "",
				"plan ConfigMap aicr-system/"+cm.Name+" (plan "+digest+") may be deleted only by the operator, which knows when no runtime or rollout refers to it any more; \"alice@example.com\" may not delete it"),
		},
		"other ConfigMaps are left alone": {
			review: review{op: admissionv1.Delete, user: alice, old: bundleConfigMap(opNS, "gpu-bundle", "bundle.yaml", testBundle)},
		},
	}
	v := newValidator()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := tc.review
			r.resource = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
			r.namespace = opNS
			r.name = cm.Name
			got := v.Validate(t.Context(), r.request(t))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

// TestUndecodableObjectIsDenied proves the rules fail closed on an object they cannot read.
func TestUndecodableObjectIsDenied(t *testing.T) {
	v := newValidator()
	req := &admissionv1.AdmissionRequest{
		UID: "u", Operation: admissionv1.Update, UserInfo: authenticationv1.UserInfo{Username: applier},
		Resource: metav1.GroupVersionResource(applicationsGVR), Namespace: engineNS, Name: "x",
		Object: runtime.RawExtension{Raw: []byte(`{"metadata": 7}`)},
	}
	got := v.Validate(t.Context(), req)
	if got.Allowed() || got.Code != 400 || got.Rule() != RuleDecode {
		t.Errorf("decision = %+v; want a 400 denial by rule %s", got, RuleDecode)
	}
}
