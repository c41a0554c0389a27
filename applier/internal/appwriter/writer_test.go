package appwriter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"
	"github.com/aicr-run/aicr-operator/testkit/bustest"
)

// harness is a Writer on fakes, with one stored plan.
type harness struct {
	w        *Writer
	apps     *fakeApps
	pub      *bustest.Recorder
	plan     *plan.Plan
	rollouts *fakeRollouts
}

// fakeRollouts holds the phases of the rollouts that have ended (any other is running) and the
// release each running one is removing.
type fakeRollouts struct {
	mu       sync.Mutex
	ended    map[string]v1alpha1.RolloutPhase
	removing map[string]string
	reads    []string
}

func (f *fakeRollouts) RemoveInProgress(_ context.Context, name, release string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, name)
	_, ended := f.ended[name]
	return !ended && f.removing[name] == release, nil
}

func (f *fakeRollouts) Ended(_ context.Context, name, _ string) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, name)
	p, ok := f.ended[name]
	return string(p), ok, nil
}

func newHarness(t *testing.T, cms ...*corev1.ConfigMap) *harness {
	t.Helper()
	p, cm := testPlan(t, "hello")
	objs := []runtime.Object{cm}
	for _, c := range cms {
		objs = append(objs, c)
	}
	h := &harness{apps: newFakeApps(t), pub: &bustest.Recorder{}, plan: p, rollouts: &fakeRollouts{ended: map[string]v1alpha1.RolloutPhase{}}}
	w, err := New(Config{
		Rollouts:  h.rollouts,
		Apps:      h.apps,
		Plans:     plan.NewCache(plan.GetLoader(k8sfake.NewClientset(objs...).CoreV1().ConfigMaps(testOperatorNS)), 0),
		Publisher: h.pub,
		Settings:  testSettings(),
	})
	if err != nil {
		t.Fatalf("new writer: %v", err)
	}
	h.w = w
	return h
}

// apply runs one ApplyCommand and fails the test on an error.
func (h *harness) apply(t *testing.T, cmd *bus.ApplyCommand) *bus.ApplyResult {
	t.Helper()
	res, err := h.w.Apply(context.Background(), cmd)
	if err != nil {
		t.Fatalf("apply %s: %v", cmd.ID, err)
	}
	return res
}

// ownedApp is an Application as the writer would have left it at step index.
func (h *harness) ownedApp(t *testing.T, release string, index int32) *argoapp.Application {
	t.Helper()
	h.apply(t, applyCmd(h.plan, release, index))
	h.apps.writes()
	return h.apps.live(release)
}

func annotations(app *argoapp.Application, keys ...string) map[string]string {
	out := map[string]string{}
	for _, k := range keys {
		if v, ok := app.Annotations[k]; ok {
			out[k] = v
		}
	}
	return out
}

func verbs(calls []call) []string {
	var out []string
	for _, c := range calls {
		v := c.Verb
		if c.Verb == "patch" {
			v = string(c.PatchType) + "/" + c.Manager
		}
		out = append(out, v)
	}
	return out
}

const (
	applyVerb  = string(types.ApplyPatchType) + "/" + v1alpha1.FieldManager
	removeVerb = string(types.ApplyPatchType) + "/" + RemoveFieldManager
	mergeVerb  = string(types.MergePatchType) + "/" + v1alpha1.FieldManager
	createVerb = "create"
)

func TestApplyWrites(t *testing.T) {
	stepKeys := []string{v1alpha1.AnnotationStep, v1alpha1.AnnotationStepRolloutUID, v1alpha1.AnnotationStepWrite, v1alpha1.AnnotationRefreshFor, v1alpha1.AnnotationArgoRefresh}
	tests := map[string]struct {
		// setup runs before the command; it returns the command to run.
		setup           func(t *testing.T, h *harness) *bus.ApplyCommand
		wantOutcome     string
		wantWrites      []string
		wantAnnotations map[string]string
	}{
		"a new Application is created (never applied: that would take over a namesake made meanwhile), its fields handed to the operator's apply, and reported Written": {
			setup:       func(t *testing.T, h *harness) *bus.ApplyCommand { return applyCmd(h.plan, "gpu-operator", 1) },
			wantOutcome: bus.OutcomeWritten,
			wantWrites:  []string{createVerb, mergeVerb, mergeVerb}, // the create, the handover, the refresh
			wantAnnotations: map[string]string{
				v1alpha1.AnnotationStep: testRollout + "/1", v1alpha1.AnnotationStepRolloutUID: testRolloutUID, v1alpha1.AnnotationStepWrite: v1alpha1.StepWriteChanged,
				v1alpha1.AnnotationRefreshFor: stepToken(1), v1alpha1.AnnotationArgoRefresh: v1alpha1.ArgoRefreshNormal,
			},
		},
		"a new step with the same spec is unchanged and, as every step's write, asks Argo CD to refresh in a separate merge patch": {
			setup: func(t *testing.T, h *harness) *bus.ApplyCommand {
				h.ownedApp(t, "gpu-operator", 1)
				return applyCmd(h.plan, "gpu-operator", 2, func(c *bus.ApplyCommand) { c.Action = v1alpha1.ActionApply })
			},
			wantOutcome: bus.OutcomeRefreshed,
			wantWrites:  []string{applyVerb, mergeVerb},
			wantAnnotations: map[string]string{
				v1alpha1.AnnotationStep: testRollout + "/2", v1alpha1.AnnotationStepRolloutUID: testRolloutUID, v1alpha1.AnnotationStepWrite: v1alpha1.StepWriteUnchanged,
				v1alpha1.AnnotationRefreshFor: stepToken(2), v1alpha1.AnnotationArgoRefresh: v1alpha1.ArgoRefreshNormal,
			},
		},
		"a redelivered unchanged command does not ask for a second refresh after Argo CD took the first": {
			setup: func(t *testing.T, h *harness) *bus.ApplyCommand {
				h.ownedApp(t, "gpu-operator", 1)
				cmd := applyCmd(h.plan, "gpu-operator", 2)
				h.apply(t, cmd)
				h.apps.update("gpu-operator", func(a *argoapp.Application) { delete(a.Annotations, v1alpha1.AnnotationArgoRefresh) })
				h.apps.writes()
				return cmd
			},
			wantOutcome: bus.OutcomeRefreshed,
			wantWrites:  []string{applyVerb},
			wantAnnotations: map[string]string{
				v1alpha1.AnnotationStep: testRollout + "/2", v1alpha1.AnnotationStepRolloutUID: testRolloutUID, v1alpha1.AnnotationStepWrite: v1alpha1.StepWriteUnchanged,
				v1alpha1.AnnotationRefreshFor: stepToken(2),
			},
		},
		"a redelivered changed command keeps step-write changed although the spec now matches, and asks for no second refresh": {
			setup: func(t *testing.T, h *harness) *bus.ApplyCommand {
				cmd := applyCmd(h.plan, "gpu-operator", 1)
				h.apply(t, cmd)
				h.apps.update("gpu-operator", func(a *argoapp.Application) { delete(a.Annotations, v1alpha1.AnnotationArgoRefresh) })
				h.apps.writes()
				return cmd
			},
			wantOutcome: bus.OutcomeWritten,
			wantWrites:  []string{applyVerb},
			wantAnnotations: map[string]string{
				v1alpha1.AnnotationStep: testRollout + "/1", v1alpha1.AnnotationStepRolloutUID: testRolloutUID, v1alpha1.AnnotationStepWrite: v1alpha1.StepWriteChanged,
				v1alpha1.AnnotationRefreshFor: stepToken(1),
			},
		},
		"the same step of a namesake rollout, started in the same second, asks for a refresh of its own": {
			// A rollout deleted and created again under its name (a move undone and redone)
			// has the same step IDs, and its step may start in the same second. The first
			// rollout's refresh handshake, done, proves nothing about the second's step.
			setup: func(t *testing.T, h *harness) *bus.ApplyCommand {
				h.ownedApp(t, "gpu-operator", 1)
				h.apply(t, applyCmd(h.plan, "gpu-operator", 2))
				h.apps.update("gpu-operator", func(a *argoapp.Application) { delete(a.Annotations, v1alpha1.AnnotationArgoRefresh) })
				h.apps.writes()
				return applyCmd(h.plan, "gpu-operator", 2, func(c *bus.ApplyCommand) { c.Step.RolloutUID = namesakeUID })
			},
			wantOutcome: bus.OutcomeRefreshed,
			wantWrites:  []string{applyVerb, mergeVerb},
			wantAnnotations: map[string]string{
				v1alpha1.AnnotationStep: testRollout + "/2", v1alpha1.AnnotationStepRolloutUID: namesakeUID, v1alpha1.AnnotationStepWrite: v1alpha1.StepWriteUnchanged,
				v1alpha1.AnnotationRefreshFor: v1alpha1.StepToken(testRollout+"/2", namesakeUID), v1alpha1.AnnotationArgoRefresh: v1alpha1.ArgoRefreshNormal,
			},
		},
		"new values are a changed write": {
			setup: func(t *testing.T, h *harness) *bus.ApplyCommand {
				h.ownedApp(t, "gpu-operator", 1)
				h.apps.update("gpu-operator", func(a *argoapp.Application) {
					a.Spec.Source.Helm.ValuesObject.Raw = []byte(`{"message":"edited"}`)
				})
				return applyCmd(h.plan, "gpu-operator", 2)
			},
			wantOutcome: bus.OutcomeWritten,
			wantWrites:  []string{applyVerb, mergeVerb},
			wantAnnotations: map[string]string{
				v1alpha1.AnnotationStep: testRollout + "/2", v1alpha1.AnnotationStepRolloutUID: testRolloutUID, v1alpha1.AnnotationStepWrite: v1alpha1.StepWriteChanged,
				v1alpha1.AnnotationRefreshFor: stepToken(2), v1alpha1.AnnotationArgoRefresh: v1alpha1.ArgoRefreshNormal,
			},
		},
		"a changed destination is a changed write": {
			setup: func(t *testing.T, h *harness) *bus.ApplyCommand {
				h.ownedApp(t, "gpu-operator", 1)
				h.apps.update("gpu-operator", func(a *argoapp.Application) { a.Spec.Destination.Namespace = "elsewhere" })
				return applyCmd(h.plan, "gpu-operator", 2)
			},
			wantOutcome: bus.OutcomeWritten,
			wantWrites:  []string{applyVerb, mergeVerb},
			wantAnnotations: map[string]string{
				v1alpha1.AnnotationStep: testRollout + "/2", v1alpha1.AnnotationStepRolloutUID: testRolloutUID, v1alpha1.AnnotationStepWrite: v1alpha1.StepWriteChanged,
				v1alpha1.AnnotationRefreshFor: stepToken(2), v1alpha1.AnnotationArgoRefresh: v1alpha1.ArgoRefreshNormal,
			},
		},
		"dropped ignoreDifferences are a changed write": {
			setup: func(t *testing.T, h *harness) *bus.ApplyCommand {
				h.ownedApp(t, "gpu-operator", 1)
				h.apps.update("gpu-operator", func(a *argoapp.Application) { a.Spec.IgnoreDifferences = nil })
				return applyCmd(h.plan, "gpu-operator", 2)
			},
			wantOutcome: bus.OutcomeWritten,
			wantWrites:  []string{applyVerb, mergeVerb},
			wantAnnotations: map[string]string{
				v1alpha1.AnnotationStep: testRollout + "/2", v1alpha1.AnnotationStepRolloutUID: testRolloutUID, v1alpha1.AnnotationStepWrite: v1alpha1.StepWriteChanged,
				v1alpha1.AnnotationRefreshFor: stepToken(2), v1alpha1.AnnotationArgoRefresh: v1alpha1.ArgoRefreshNormal,
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			cmd := tc.setup(t, h)
			res := h.apply(t, cmd)
			if res.Outcome != tc.wantOutcome {
				t.Errorf("outcome = %s (%s), want %s", res.Outcome, res.Message, tc.wantOutcome)
			}
			writes := h.apps.writes()
			if diff := cmp.Diff(tc.wantWrites, verbs(writes)); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			for _, c := range writes {
				if c.PatchType == types.ApplyPatchType {
					if !c.Force {
						t.Errorf("server-side apply without force: a hand edit by another manager would conflict")
					}
					if strings.Contains(c.Body, v1alpha1.AnnotationArgoRefresh) {
						t.Errorf("applied manifest carries %s; it must be a separate patch", v1alpha1.AnnotationArgoRefresh)
					}
				}
			}
			live := h.apps.live(cmd.Release)
			if diff := cmp.Diff(tc.wantAnnotations, annotations(live, stepKeys...)); diff != "" {
				t.Errorf("step annotations (-want +got):\n%s", diff)
			}
			want, _ := appspec.Build(testSettings(), appspec.Input{Runtime: testRuntime, RuntimeUID: testRuntimeUID,
				PlanDigest: h.plan.Digest(), Release: mustRelease(t, h.plan, cmd.Release), StepID: cmd.Step.ID, StepStarted: cmd.Step.Started})
			if !appspec.EqualSource(want.Spec.Source, live.Spec.Source) || !appspec.EqualDestination(want.Spec.Destination, live.Spec.Destination) {
				t.Errorf("live spec is not the planned one:\n%s", cmp.Diff(want.Spec, live.Spec))
			}
			if res.UID != string(live.UID) || res.ResourceVersion != live.ResourceVersion {
				t.Errorf("result names %s@%s, live is %s@%s", res.UID, res.ResourceVersion, live.UID, live.ResourceVersion)
			}
		})
	}
}

func mustRelease(t testing.TB, p *plan.Plan, name string) *plan.Release {
	t.Helper()
	r, ok := p.Release(name)
	if !ok {
		t.Fatalf("plan has no release %s", name)
	}
	return r
}

func TestApplyRefuses(t *testing.T) {
	foreign := func(labels, annotations map[string]string) *argoapp.Application {
		return &argoapp.Application{
			ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator", Labels: labels, Annotations: annotations},
			Spec:       argoapp.ApplicationSpec{Project: "default", Source: &argoapp.ApplicationSource{RepoURL: "https://example.com/theirs"}},
		}
	}
	tests := map[string]struct {
		setup       func(t *testing.T, h *harness)
		wantOutcome string
		wantReason  string
		wantMessage []string
	}{
		"an Application without the managed-by label is foreign": {
			setup:       func(t *testing.T, h *harness) { h.apps.create(foreign(nil, nil)) },
			wantOutcome: bus.OutcomeForeign,
			wantReason:  v1alpha1.ReasonForeignObject,
			wantMessage: []string{`label app.kubernetes.io/managed-by is missing (want "aicr-operator")`, `annotation operator.aicr.run/runtime-uid is missing`},
		},
		"an Application managed by another tool is foreign": {
			setup: func(t *testing.T, h *harness) {
				h.apps.create(foreign(map[string]string{v1alpha1.LabelManagedBy: "Helm"}, map[string]string{v1alpha1.AnnotationRuntimeUID: testRuntimeUID}))
			},
			wantOutcome: bus.OutcomeForeign,
			wantReason:  v1alpha1.ReasonForeignObject,
			wantMessage: []string{`label app.kubernetes.io/managed-by is "Helm" (want "aicr-operator")`},
		},
		"an Application of another runtime (UID) is foreign": {
			setup: func(t *testing.T, h *harness) {
				h.apps.create(foreign(map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}, map[string]string{v1alpha1.AnnotationRuntimeUID: "other-uid"}))
			},
			wantOutcome: bus.OutcomeForeign,
			wantReason:  v1alpha1.ReasonForeignObject,
			wantMessage: []string{`annotation operator.aicr.run/runtime-uid is "other-uid" (want "` + testRuntimeUID + `")`},
		},
		"an owned Application carrying the resources finalizer outside a Remove step is blocked": {
			setup: func(t *testing.T, h *harness) {
				h.ownedApp(t, "gpu-operator", 1)
				h.apps.update("gpu-operator", func(a *argoapp.Application) { a.Finalizers = []string{v1alpha1.ArgoResourcesFinalizer} })
			},
			wantOutcome: bus.OutcomeBlocked,
			wantReason:  bus.ResultReasonFinalizerPresent,
			wantMessage: []string{v1alpha1.ArgoResourcesFinalizer, v1alpha1.AnnotationDeleteRollout},
		},
		"a command for a plan that is not stored fails with PlanUnreadable": {
			wantOutcome: bus.OutcomeFailed,
			wantReason:  bus.ResultReasonPlanUnreadable,
			wantMessage: []string{"aicr-plan-0000", "not found"},
		},
		"a command for a release the plan lacks fails with PlanUnreadable": {
			wantOutcome: bus.OutcomeFailed,
			wantReason:  bus.ResultReasonPlanUnreadable,
			wantMessage: []string{`has no release "no-such-release"`},
		},
		"a command without a runtime UID fails with InvalidCommand": {
			wantOutcome: bus.OutcomeFailed,
			wantReason:  bus.ResultReasonInvalidCommand,
			wantMessage: []string{"runtime_uid"},
		},
		"an apply command asking for a Remove fails with InvalidCommand": {
			wantOutcome: bus.OutcomeFailed,
			wantReason:  bus.ResultReasonInvalidCommand,
			wantMessage: []string{`action "Remove"`, "RemoveCommand"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			if tc.setup != nil {
				tc.setup(t, h)
			}
			before := h.apps.live("gpu-operator")
			h.apps.writes()
			cmd := applyCmd(h.plan, "gpu-operator", 2)
			switch {
			case strings.Contains(name, "not stored"):
				cmd.PlanDigest = "sha256:" + strings.Repeat("0", 64)
			case strings.Contains(name, "release the plan lacks"):
				cmd.Release = "no-such-release"
			case strings.Contains(name, "runtime UID"):
				cmd.RuntimeUID = ""
			case strings.Contains(name, "asking for a Remove"):
				cmd.Action = v1alpha1.ActionRemove
			}
			res := h.apply(t, cmd)
			if res.Outcome != tc.wantOutcome || res.Reason != tc.wantReason {
				t.Errorf("result = %s/%s (%s), want %s/%s", res.Outcome, res.Reason, res.Message, tc.wantOutcome, tc.wantReason)
			}
			for _, s := range tc.wantMessage {
				if !strings.Contains(res.Message, s) {
					t.Errorf("message %q does not say %q", res.Message, s)
				}
			}
			if w := h.apps.writes(); len(w) > 0 {
				t.Errorf("writes = %v, want none", verbs(w))
			}
			if diff := cmp.Diff(before, h.apps.live("gpu-operator")); diff != "" {
				t.Errorf("the Application changed (-before +after):\n%s", diff)
			}
		})
	}
}

func TestApplyTransientErrorIsRetried(t *testing.T) {
	h := newHarness(t)
	h.ownedApp(t, "gpu-operator", 1)
	h.apps.fail = func(verb string, c call) error {
		if verb == "patch" {
			return apierrors.NewTooManyRequests("slow down", 1)
		}
		return nil
	}
	_, err := h.w.Apply(context.Background(), applyCmd(h.plan, "gpu-operator", 2))
	if err == nil {
		t.Fatal("Apply succeeded; want the API error back")
	}
	var notYet *dispatch.NotYetError
	if dispatch.IsTerminal(err) || errors.As(err, &notYet) {
		t.Errorf("error %v is terminal or not-yet; want a plain error the dispatcher retries with backoff", err)
	}
	if !strings.Contains(err.Error(), "apply application argocd/gpu-operator") {
		t.Errorf("error %q does not name the write", err)
	}
}

func TestApplyRejectedObjectFails(t *testing.T) {
	h := newHarness(t)
	h.apps.fail = func(verb string, c call) error {
		if verb == "create" {
			return apierrors.NewInvalid(schema.GroupKind{Group: "argoproj.io", Kind: "Application"}, "gpu-operator",
				field.ErrorList{field.Invalid(field.NewPath("spec", "project"), "aicr", "project does not exist")})
		}
		return nil
	}
	res := h.apply(t, applyCmd(h.plan, "gpu-operator", 1))
	if res.Outcome != bus.OutcomeFailed || res.Reason != bus.ResultReasonApplicationRejected || !strings.Contains(res.Message, "spec.project") {
		t.Errorf("result = %s/%s %q; want Failed/%s naming spec.project", res.Outcome, res.Reason, res.Message, bus.ResultReasonApplicationRejected)
	}
}

func TestApplyDeletingApplicationWaits(t *testing.T) {
	h := newHarness(t)
	h.ownedApp(t, "gpu-operator", 1)
	h.apps.update("gpu-operator", func(a *argoapp.Application) {
		a.Finalizers = []string{v1alpha1.ArgoResourcesFinalizer}
		a.Annotations[v1alpha1.AnnotationDeleteRollout] = testRollout
	})
	if err := h.apps.Delete(context.Background(), "gpu-operator", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	h.apps.writes()
	_, err := h.w.Apply(context.Background(), applyCmd(h.plan, "gpu-operator", 2))
	var notYet *dispatch.NotYetError
	if !errors.As(err, &notYet) {
		t.Fatalf("Apply = %v; want NotYet while the Application is being deleted", err)
	}
	if w := h.apps.writes(); len(w) > 0 {
		t.Errorf("writes = %v, want none", verbs(w))
	}
}

func TestApplySuspendEngineWritesAutomatedSyncOff(t *testing.T) {
	h := newHarness(t)
	h.apply(t, applyCmd(h.plan, "gpu-operator", 1, func(c *bus.ApplyCommand) { c.SuspendEngine = true }))
	live := h.apps.live("gpu-operator")
	auto := live.Spec.SyncPolicy.Automated
	if auto == nil || auto.Enabled == nil || *auto.Enabled {
		t.Errorf("automated = %+v; want enabled: false", auto)
	}
	if live.Annotations[v1alpha1.AnnotationEngineSuspended] != "true" {
		t.Errorf("annotation %s missing", v1alpha1.AnnotationEngineSuspended)
	}
	// Resuming writes it back on.
	h.apply(t, applyCmd(h.plan, "gpu-operator", 2))
	live = h.apps.live("gpu-operator")
	if auto := live.Spec.SyncPolicy.Automated; auto.Enabled == nil || !*auto.Enabled {
		t.Errorf("automated after resuming = %+v; want enabled: true", auto)
	}
	if _, ok := live.Annotations[v1alpha1.AnnotationEngineSuspended]; ok {
		t.Errorf("annotation %s kept after resuming", v1alpha1.AnnotationEngineSuspended)
	}
}

// TestApplyForcesHandEditBack: another field manager's edit of a field the operator applies
// is taken back by the next write (scenario 10 of the recorded Argo CD
// fixtures: an unforced apply would conflict).
func TestApplyForcesHandEditBack(t *testing.T) {
	h := newHarness(t)
	h.ownedApp(t, "gpu-operator", 1)
	force := true
	edit := `{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","metadata":{"name":"gpu-operator","namespace":"argocd"},` +
		`"spec":{"syncPolicy":{"automated":{"enabled":false}}}}`
	if _, err := h.apps.Patch(context.Background(), "gpu-operator", types.ApplyPatchType, []byte(edit), metav1.PatchOptions{FieldManager: "kubectl-edit", Force: &force}); err != nil {
		t.Fatalf("hand edit: %v", err)
	}
	if e := h.apps.live("gpu-operator").Spec.SyncPolicy.Automated.Enabled; e == nil || *e {
		t.Fatalf("hand edit did not land: enabled = %v", e)
	}
	h.apps.writes()
	res := h.apply(t, applyCmd(h.plan, "gpu-operator", 2, func(c *bus.ApplyCommand) { c.Action = v1alpha1.ActionApply }))
	if res.Outcome != bus.OutcomeRefreshed {
		t.Errorf("outcome = %s; want Refreshed (source, destination and ignoreDifferences were untouched)", res.Outcome)
	}
	live := h.apps.live("gpu-operator")
	if e := live.Spec.SyncPolicy.Automated.Enabled; e == nil || !*e {
		t.Errorf("automated.enabled = %v after the operator's write; want true", e)
	}
	managers := map[string]bool{}
	for _, mf := range live.ManagedFields {
		managers[mf.Manager] = true
	}
	if !managers[v1alpha1.FieldManager] {
		t.Errorf("managedFields lack %s: %v", v1alpha1.FieldManager, managers)
	}
}

// TestApplyRemovesWhatNobodyStates: a repair makes the Application exactly what the plan says.
// Fields another manager added, which the operator's apply never owned (an apply removes only
// fields its manager owned), go too: an added spec.sources, source.chart, a values key, a
// revisionHistoryLimit, and a plan-decided annotation the plan does not state.
func TestApplyRemovesWhatNobodyStates(t *testing.T) {
	h := newHarness(t)
	h.ownedApp(t, "gpu-operator", 1)
	want := h.apps.live("gpu-operator").Spec
	edit := `{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","metadata":{"name":"gpu-operator","namespace":"argocd",` +
		`"annotations":{"` + v1alpha1.AnnotationReadinessGate + `":"true","someone.example/note":"kept"}},` +
		`"spec":{"sources":[{"repoURL":"https://example.com/extra","path":"x"}],"revisionHistoryLimit":3,` +
		`"source":{"chart":"other","helm":{"valuesObject":{"added":{"by":"hand"}}}}}}`
	if _, err := h.apps.Patch(context.Background(), "gpu-operator", types.MergePatchType, []byte(edit), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatalf("hand edit: %v", err)
	}
	if live := h.apps.live("gpu-operator"); len(live.Spec.Sources) == 0 || live.Spec.Source.Chart != "other" {
		t.Fatalf("hand edit did not land: %+v", live.Spec)
	}
	h.apps.writes()
	res := h.apply(t, applyCmd(h.plan, "gpu-operator", 2, func(c *bus.ApplyCommand) { c.Action = v1alpha1.ActionApply }))
	if res.Outcome != bus.OutcomeWritten {
		t.Errorf("outcome = %s (%s); want Written (the source differed)", res.Outcome, res.Message)
	}
	if diff := cmp.Diff([]string{applyVerb, mergeVerb, mergeVerb}, verbs(h.apps.writes())); diff != "" {
		t.Errorf("writes (the apply, the removal, the refresh) (-want +got):\n%s", diff)
	}
	live := h.apps.live("gpu-operator")
	if diff := cmp.Diff(want, live.Spec); diff != "" {
		t.Errorf("spec after the repair differs from the plan's (-plan +live):\n%s", diff)
	}
	if _, ok := live.Annotations[v1alpha1.AnnotationReadinessGate]; ok {
		t.Errorf("the hand-set %s annotation is still there", v1alpha1.AnnotationReadinessGate)
	}
	if live.Annotations["someone.example/note"] != "kept" {
		t.Errorf("an annotation no plan decides was removed: %v", live.Annotations)
	}
	// Nothing left to remove: the next write is the apply alone (and a refresh for its step).
	h.apply(t, applyCmd(h.plan, "gpu-operator", 3, func(c *bus.ApplyCommand) { c.Action = v1alpha1.ActionApply }))
	if diff := cmp.Diff([]string{applyVerb, mergeVerb}, verbs(h.apps.writes())); diff != "" {
		t.Errorf("writes of the next step (-want +got):\n%s", diff)
	}
}

// The delete-rollout marker is taken back by an Apply, never trusted: with the resources
// finalizer the Apply writes only while the marker's rollout removes the release (and takes
// both back); otherwise it is Blocked. Without the finalizer the marker goes, whoever set it.
func TestApplyTakesTheDeleteRolloutMarkerBack(t *testing.T) {
	const marked = "gpu-operator"
	byRemove := func(t *testing.T, h *harness) {
		body, err := removeManifest(marked, testEngineNS, testRollout, guard{})
		if err != nil {
			t.Fatal(err)
		}
		force := true
		if _, err := h.apps.Patch(context.Background(), marked, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: RemoveFieldManager, Force: &force}); err != nil {
			t.Fatalf("prepare remove: %v", err)
		}
	}
	byHand := func(finalizer bool) func(t *testing.T, h *harness) {
		return func(t *testing.T, h *harness) {
			patch := `{"metadata":{"annotations":{"` + v1alpha1.AnnotationDeleteRollout + `":"r-by-hand"}}}`
			if finalizer {
				patch = `{"metadata":{"annotations":{"` + v1alpha1.AnnotationDeleteRollout + `":"r-by-hand"},"finalizers":["` + v1alpha1.ArgoResourcesFinalizer + `"]}}`
			}
			if _, err := h.apps.Patch(context.Background(), marked, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "kubectl-patch"}); err != nil {
				t.Fatalf("mark by hand: %v", err)
			}
		}
	}
	tests := map[string]struct {
		mark        func(t *testing.T, h *harness)
		removing    bool // the marker's rollout is removing the release
		ended       bool // the marker's rollout has ended
		wantBlocked string
		wantWrites  []string
	}{
		"a Remove in progress: written, and its marker and finalizer taken back": {
			mark: byRemove, removing: true, wantWrites: []string{applyVerb, removeVerb, mergeVerb},
		},
		"an abandoned Remove whose rollout ended, finalizer still on: Blocked": {
			mark: byRemove, removing: true, ended: true, wantBlocked: "but rollout " + testRollout + " is not removing gpu-operator",
		},
		"a marker and the finalizer set by hand: Blocked": {
			mark: byHand(true), wantBlocked: "the annotation " + v1alpha1.AnnotationDeleteRollout + "=r-by-hand, but rollout r-by-hand is not removing gpu-operator",
		},
		"a marker set by hand, no finalizer: written, and the marker removed": {
			mark: byHand(false), wantWrites: []string{applyVerb, removeVerb, mergeVerb, mergeVerb},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.ownedApp(t, marked, 1)
			tc.mark(t, h)
			if tc.removing {
				h.rollouts.removing = map[string]string{testRollout: marked}
			}
			if tc.ended {
				h.rollouts.ended[testRollout] = v1alpha1.PhaseFailed
			}
			h.apps.writes()
			res := h.apply(t, applyCmd(h.plan, marked, 2))
			if tc.wantBlocked != "" {
				if res.Outcome != bus.OutcomeBlocked || res.Reason != bus.ResultReasonFinalizerPresent || !strings.Contains(res.Message, tc.wantBlocked) {
					t.Fatalf("result %s/%s %q, want Blocked/%s saying %q", res.Outcome, res.Reason, res.Message, bus.ResultReasonFinalizerPresent, tc.wantBlocked)
				}
				if w := h.apps.writes(); len(w) != 0 {
					t.Errorf("a Blocked Apply wrote %v", verbs(w))
				}
				return
			}
			if res.Outcome == bus.OutcomeBlocked {
				t.Fatalf("outcome Blocked: %s", res.Message)
			}
			live := h.apps.live(marked)
			if len(live.Finalizers) != 0 || live.Annotations[v1alpha1.AnnotationDeleteRollout] != "" {
				t.Errorf("finalizers %v, delete-rollout %q; want both gone so deleting the Application keeps the stack",
					live.Finalizers, live.Annotations[v1alpha1.AnnotationDeleteRollout])
			}
			// the spec did not change, so the step also asks for a refresh (the last merge patch)
			if diff := cmp.Diff(tc.wantWrites, verbs(h.apps.writes())); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestApplyReadinessReleaseSync(t *testing.T) {
	const gate = "gpu-readiness"
	running := func(by argoapp.OperationInitiator, info ...*argoapp.Info) func(*argoapp.Application) {
		return func(a *argoapp.Application) {
			a.Status.OperationState = &argoapp.OperationState{Phase: argoapp.OperationRunning,
				Operation: argoapp.Operation{InitiatedBy: by, Info: info}, StartedAt: metav1.Now()}
		}
	}
	tests := map[string]struct {
		// argo changes the stored Application before the command runs (nil: nothing).
		argo        func(*argoapp.Application)
		wantNotYet  bool
		wantOutcome string
		wantSync    bool
	}{
		"a readiness release without an operation gets our sync operation": {
			wantOutcome: bus.OutcomeSyncStarted, wantSync: true,
		},
		"a finished operation of an earlier step does not stop the sync": {
			argo: func(a *argoapp.Application) {
				a.Status.OperationState = &argoapp.OperationState{Phase: argoapp.OperationSucceeded,
					Operation: argoapp.Operation{Info: []*argoapp.Info{{Name: appspec.StepInfoName, Value: stepToken(1)}}}}
			},
			wantOutcome: bus.OutcomeSyncStarted, wantSync: true,
		},
		"an automated sync still running is waited for": {
			argo:       running(argoapp.OperationInitiator{Automated: true}),
			wantNotYet: true,
		},
		"an operation set but not yet picked up by Argo CD is waited for": {
			argo: func(a *argoapp.Application) {
				a.Operation = &argoapp.Operation{InitiatedBy: argoapp.OperationInitiator{Username: "admin"}, Sync: &argoapp.SyncOperation{}}
			},
			wantNotYet: true,
		},
		"our sync of this step, already running, is not started twice": {
			argo:        running(argoapp.OperationInitiator{Username: v1alpha1.FieldManager}, &argoapp.Info{Name: appspec.StepInfoName, Value: stepToken(2)}),
			wantOutcome: bus.OutcomeSyncStarted,
		},
		"our sync of this step, still pending in .operation, is not started twice": {
			argo: func(a *argoapp.Application) {
				a.Operation = appspec.SyncOperation(a, stepToken(2))
			},
			wantOutcome: bus.OutcomeSyncStarted,
		},
		"a finished sync of the same step of a namesake rollout does not stand for this one's": {
			argo: func(a *argoapp.Application) {
				a.Status.OperationState = &argoapp.OperationState{Phase: argoapp.OperationSucceeded,
					Operation: argoapp.Operation{InitiatedBy: argoapp.OperationInitiator{Username: v1alpha1.FieldManager},
						Info: []*argoapp.Info{{Name: appspec.StepInfoName, Value: v1alpha1.StepToken(testRollout+"/2", namesakeUID)}}}}
			},
			wantOutcome: bus.OutcomeSyncStarted, wantSync: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.ownedApp(t, gate, 1)
			h.apps.update(gate, func(a *argoapp.Application) {
				a.Operation = nil
				a.Status.OperationState = nil
				if tc.argo != nil {
					tc.argo(a)
				}
			})
			before := h.apps.live(gate)
			h.apps.writes()
			res, err := h.w.Apply(context.Background(), applyCmd(h.plan, gate, 2))
			var notYet *dispatch.NotYetError
			if tc.wantNotYet {
				if !errors.As(err, &notYet) {
					t.Fatalf("Apply = %v, %v; want NotYet", res, err)
				}
			} else {
				if err != nil {
					t.Fatalf("Apply: %v", err)
				}
				if res.Outcome != tc.wantOutcome {
					t.Errorf("outcome = %s, want %s", res.Outcome, tc.wantOutcome)
				}
			}
			var syncs []call
			for _, c := range h.apps.writes() {
				if c.PatchType == types.MergePatchType && strings.Contains(c.Body, `"operation"`) {
					syncs = append(syncs, c)
				}
			}
			if !tc.wantSync {
				if len(syncs) > 0 {
					t.Errorf("sync operation written: %s", syncs[0].Body)
				}
				if diff := cmp.Diff(before.Operation, h.apps.live(gate).Operation); diff != "" {
					t.Errorf("operation changed (-before +after):\n%s", diff)
				}
				return
			}
			if len(syncs) != 1 {
				t.Fatalf("sync patches = %d, want 1", len(syncs))
			}
			var patch struct {
				Metadata struct {
					ResourceVersion string `json:"resourceVersion"`
				} `json:"metadata"`
				Operation *argoapp.Operation `json:"operation"`
				Status    map[string]any     `json:"status"`
			}
			if err := json.Unmarshal([]byte(syncs[0].Body), &patch); err != nil {
				t.Fatalf("decode sync patch: %v", err)
			}
			if patch.Metadata.ResourceVersion == "" {
				t.Errorf("sync patch is not guarded by resourceVersion")
			}
			if v, ok := patch.Status["operationState"]; !ok || v != nil {
				t.Errorf("sync patch status = %v; want operationState: null in the same patch", patch.Status)
			}
			live := h.apps.live(gate)
			op := live.Operation
			if op == nil || op.Sync == nil {
				t.Fatalf("no sync operation on the Application")
			}
			if op.InitiatedBy.Username != v1alpha1.FieldManager || !appspec.HasStepInfo(op.Info, stepToken(2)) {
				t.Errorf("operation initiatedBy %+v info %v; want %s and %s=%s", op.InitiatedBy, op.Info, v1alpha1.FieldManager, appspec.StepInfoName, stepToken(2))
			}
			if diff := cmp.Diff(appspec.SyncOptions(), op.Sync.SyncOptions); diff != "" {
				t.Errorf("operation syncOptions (-want +got):\n%s", diff)
			}
			if op.Sync.Revision != live.Spec.Source.TargetRevision {
				t.Errorf("operation revision %s, want %s", op.Sync.Revision, live.Spec.Source.TargetRevision)
			}
			if live.Status.OperationState != nil {
				t.Errorf("operationState kept: %+v", live.Status.OperationState)
			}
		})
	}
}

// TestApplySuspendedReadinessReleaseStartsNoSync: a write under suspendEngine turns automated
// sync off and starts no explicit sync of a readiness release. A sync started then ran while the
// engine was meant to hold still, and made the resume write wait (NotYet) until after a Remove of
// the release had deleted the Application, which the resume then created again (e2e/lifecycle).
func TestApplySuspendedReadinessReleaseStartsNoSync(t *testing.T) {
	const gate = "gpu-readiness"
	h := newHarness(t)
	h.ownedApp(t, gate, 1)
	h.apps.update(gate, func(a *argoapp.Application) { a.Operation, a.Status.OperationState = nil, nil })
	h.apps.writes()
	res := h.apply(t, applyCmd(h.plan, gate, 2, func(c *bus.ApplyCommand) { c.SuspendEngine = true }))
	if res.Outcome == bus.OutcomeSyncStarted {
		t.Errorf("outcome %s under suspendEngine; want no sync", res.Outcome)
	}
	if op := h.apps.live(gate).Operation; op != nil {
		t.Errorf("sync operation %+v written under suspendEngine", op)
	}
	// Resuming syncs the gate again.
	if res := h.apply(t, applyCmd(h.plan, gate, 3)); res.Outcome != bus.OutcomeSyncStarted {
		t.Errorf("outcome after resuming = %s, want %s", res.Outcome, bus.OutcomeSyncStarted)
	}
}

// TestApplySyncDoesNotClobberAnOperationStartedMeanwhile: Argo CD starts an automated sync
// between the writer's read and its sync patch; the resourceVersion guard makes the writer read
// again and wait instead of replacing it.
func TestApplySyncDoesNotClobberAnOperationStartedMeanwhile(t *testing.T) {
	const gate = "gpu-readiness"
	h := newHarness(t)
	h.ownedApp(t, gate, 1)
	h.apps.update(gate, func(a *argoapp.Application) { a.Operation = nil })
	h.apps.writes()
	fired := false
	h.apps.before = func(verb string, c call) {
		if fired || c.PatchType != types.MergePatchType || !strings.Contains(c.Body, `"operation"`) {
			return
		}
		fired = true
		h.apps.update(gate, func(a *argoapp.Application) {
			a.Operation = &argoapp.Operation{InitiatedBy: argoapp.OperationInitiator{Automated: true}, Sync: &argoapp.SyncOperation{Revision: "x"}}
		})
	}
	_, err := h.w.Apply(context.Background(), applyCmd(h.plan, gate, 2))
	var notYet *dispatch.NotYetError
	if !errors.As(err, &notYet) {
		t.Fatalf("Apply = %v; want NotYet after the guarded patch conflicted", err)
	}
	if op := h.apps.live(gate).Operation; op == nil || !op.InitiatedBy.Automated {
		t.Errorf("operation = %+v; want Argo CD's automated one untouched", op)
	}
}

func TestRemove(t *testing.T) {
	tests := map[string]struct {
		setup       func(t *testing.T, h *harness) *bus.RemoveCommand
		wantNotYet  bool
		wantOutcome string
		wantReason  string
		wantWrites  []string
		// wantLive says whether an Application named gpu-operator exists afterwards.
		wantLive bool
	}{
		"an Application already gone is Removed": {
			setup:       func(t *testing.T, h *harness) *bus.RemoveCommand { return removeCmd("gpu-operator", 9) },
			wantOutcome: bus.OutcomeRemoved,
		},
		"an owned Application gets the annotation and finalizer, then a UID-guarded delete, and the step waits": {
			setup: func(t *testing.T, h *harness) *bus.RemoveCommand {
				h.ownedApp(t, "gpu-operator", 1)
				return removeCmd("gpu-operator", 9)
			},
			wantNotYet: true,
			wantWrites: []string{removeVerb, "delete"},
			wantLive:   true, // Argo CD holds it with the finalizer while it deletes the resources
		},
		"a redelivery while Argo CD deletes the resources only waits": {
			setup: func(t *testing.T, h *harness) *bus.RemoveCommand {
				h.ownedApp(t, "gpu-operator", 1)
				cmd := removeCmd("gpu-operator", 9)
				if _, err := h.w.Remove(context.Background(), cmd); err == nil {
					t.Fatalf("first Remove did not wait")
				}
				h.apps.writes()
				return cmd
			},
			wantNotYet: true,
			wantLive:   true,
		},
		"once Argo CD finished, the redelivery reports Removed": {
			setup: func(t *testing.T, h *harness) *bus.RemoveCommand {
				h.ownedApp(t, "gpu-operator", 1)
				cmd := removeCmd("gpu-operator", 9)
				_, _ = h.w.Remove(context.Background(), cmd)
				h.apps.remove("gpu-operator")
				h.apps.writes()
				return cmd
			},
			wantOutcome: bus.OutcomeRemoved,
		},
		"a foreign Application is never deleted": {
			setup: func(t *testing.T, h *harness) *bus.RemoveCommand {
				h.apps.create(&argoapp.Application{ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator"}})
				return removeCmd("gpu-operator", 9)
			},
			wantOutcome: bus.OutcomeForeign,
			wantReason:  v1alpha1.ReasonForeignObject,
			wantLive:    true,
		},
		"a namesake recreated between the read and the delete survives": {
			setup: func(t *testing.T, h *harness) *bus.RemoveCommand {
				h.ownedApp(t, "gpu-operator", 1)
				h.apps.before = func(verb string, c call) {
					if verb != "delete" {
						return
					}
					h.apps.before = nil
					h.apps.remove("gpu-operator")
					h.apps.create(&argoapp.Application{ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator",
						Labels: map[string]string{v1alpha1.LabelManagedBy: "someone"}}})
				}
				return removeCmd("gpu-operator", 9)
			},
			wantOutcome: bus.OutcomeForeign,
			wantReason:  v1alpha1.ReasonForeignObject,
			wantWrites:  []string{removeVerb, "delete"},
			wantLive:    true,
		},
		"a Remove outside a rollout is an invalid command": {
			setup: func(t *testing.T, h *harness) *bus.RemoveCommand {
				h.ownedApp(t, "gpu-operator", 1)
				return removeCmd("gpu-operator", 9, func(c *bus.RemoveCommand) { c.Step.Rollout = "" })
			},
			wantOutcome: bus.OutcomeFailed,
			wantReason:  bus.ResultReasonInvalidCommand,
			wantLive:    true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			cmd := tc.setup(t, h)
			res, err := h.w.Remove(context.Background(), cmd)
			var notYet *dispatch.NotYetError
			switch {
			case tc.wantNotYet:
				if !errors.As(err, &notYet) {
					t.Fatalf("Remove = %+v, %v; want NotYet", res, err)
				}
			case err != nil:
				t.Fatalf("Remove: %v", err)
			default:
				if res.Outcome != tc.wantOutcome || res.Reason != tc.wantReason {
					t.Errorf("result = %s/%s (%s), want %s/%s", res.Outcome, res.Reason, res.Message, tc.wantOutcome, tc.wantReason)
				}
				if res.Action != v1alpha1.ActionRemove {
					t.Errorf("action = %s, want Remove", res.Action)
				}
			}
			writes := h.apps.writes()
			if diff := cmp.Diff(tc.wantWrites, verbs(writes)); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			for _, c := range writes {
				if c.Verb == "delete" && c.UID == "" {
					t.Errorf("delete without a UID precondition")
				}
			}
			live := h.apps.live("gpu-operator")
			if (live != nil) != tc.wantLive {
				t.Fatalf("Application exists = %v, want %v", live != nil, tc.wantLive)
			}
			if tc.wantNotYet && live != nil {
				if live.DeletionTimestamp == nil || live.Annotations[v1alpha1.AnnotationDeleteRollout] != testRollout || !hasResourcesFinalizer(live) {
					t.Errorf("deleting %v, delete-rollout %q, finalizers %v; want a deletion held by the resources finalizer",
						live.DeletionTimestamp, live.Annotations[v1alpha1.AnnotationDeleteRollout], live.Finalizers)
				}
			}
		})
	}
}

func TestHandlePublishesOneResultPerCommand(t *testing.T) {
	h := newHarness(t)
	cmd := applyCmd(h.plan, "gpu-operator", 1)
	data, err := json.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	msg := &dispatch.Message{Subject: bus.ApplySubject(testRuntime, "gpu-operator"), Type: bus.TypeApplyCommand, ID: cmd.ID, Data: data, Delivered: 1}
	for range 2 { // a redelivery publishes the same result ID, which JetStream drops
		if err := h.w.HandleApply(context.Background(), msg); err != nil {
			t.Fatalf("HandleApply: %v", err)
		}
	}
	want := []published{{Subject: "aicr.v1.evt.applied.cluster.gpu-operator", ID: cmd.ID + "/result"}, {Subject: "aicr.v1.evt.applied.cluster.gpu-operator", ID: cmd.ID + "/result"}}
	sent := results(t, h.pub)
	got := make([]published, len(sent))
	for i, p := range sent {
		got[i] = published{Subject: p.Subject, ID: p.ID}
		if p.Result.CommandID != cmd.ID || p.Result.Step != cmd.Step || p.Result.Outcome != bus.OutcomeWritten {
			t.Errorf("result %d = %+v", i, p.Result)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("published (-want +got):\n%s", diff)
	}

	h.pub.FailWith(errors.New("nats: timeout"))
	if err := h.w.HandleApply(context.Background(), msg); err == nil || dispatch.IsTerminal(err) {
		t.Errorf("HandleApply with a failing publisher = %v; want a retryable error", err)
	}
	bad := &dispatch.Message{Type: bus.TypeApplyCommand, Data: []byte(`{"type":"aicr.v1.ApplyCommand","step":7}`)}
	if err := h.w.HandleApply(context.Background(), bad); !dispatch.IsTerminal(err) {
		t.Errorf("HandleApply of an undecodable command = %v; want a terminal error", err)
	}
}

func TestHandleRemovePublishes(t *testing.T) {
	h := newHarness(t)
	cmd := removeCmd("gpu-operator", 3)
	data, _ := json.Marshal(cmd)
	if err := h.w.HandleRemove(context.Background(), &dispatch.Message{Type: bus.TypeRemoveCommand, Data: data}); err != nil {
		t.Fatalf("HandleRemove: %v", err)
	}
	if sent := results(t, h.pub); len(sent) != 1 || sent[0].Result.Outcome != bus.OutcomeRemoved || sent[0].ID != cmd.ID+"/result" {
		t.Errorf("published %+v; want one Removed result", sent)
	}
}

// A command redelivered after a later rollout's step wrote the Application is answered
// Outdated and changes nothing: no apply that would put back the earlier rollout's values,
// no delete of a release the later rollout installed again. The ordering tokens decide, never
// the steps' starts: the later rollout's planner may have a clock 5 s behind the earlier one's
// (and an earlier rollout's command is refused whichever way the clocks disagree).
func TestOutdatedCommandsAreNotCarriedOut(t *testing.T) {
	for _, skew := range []time.Duration{-5 * time.Second, 5 * time.Second} {
		t.Run(fmt.Sprintf("later planner's clock %+v", skew), func(t *testing.T) {
			h := newHarness(t)
			// The later rollout's command: its step started right after the earlier rollout's
			// (testStarted + 2 min, applyCmd index 2 below), as its planner's clock says.
			later := func(c *bus.ApplyCommand) {
				c.Step = bus.StepRef{Rollout: "r-later", Index: 1, ID: "r-later/1", RolloutUID: "uid-later",
					Started: testStarted.Add(2*time.Minute + time.Second + skew), Seq: "4200"}
				c.Header.ID = "r-later/1/1"
			}
			if res := h.apply(t, applyCmd(h.plan, "gpu-operator", 1, later)); res.Outcome != bus.OutcomeWritten {
				t.Fatalf("later rollout's write: %s (%s)", res.Outcome, res.Message)
			}
			h.apps.writes()
			res := h.apply(t, applyCmd(h.plan, "gpu-operator", 2, func(c *bus.ApplyCommand) { c.Action = v1alpha1.ActionApply }))
			if res.Outcome != bus.OutcomeOutdated || !strings.Contains(res.Message, "r-later/1") {
				t.Errorf("earlier rollout's redelivered apply: %s (%s), want Outdated naming r-later/1", res.Outcome, res.Message)
			}
			rm, err := h.w.Remove(context.Background(), removeCmd("gpu-operator", 3))
			if err != nil {
				t.Fatalf("remove: %v", err)
			}
			if rm.Outcome != bus.OutcomeOutdated {
				t.Errorf("earlier rollout's redelivered remove: %s (%s), want Outdated", rm.Outcome, rm.Message)
			}
			if w := h.apps.writes(); len(w) != 0 {
				t.Errorf("writes %v, want none", verbs(w))
			}
			if live := h.apps.live("gpu-operator"); live == nil || live.Annotations[v1alpha1.AnnotationStep] != "r-later/1" ||
				live.Annotations[v1alpha1.AnnotationStepSeq] != "4200" {
				t.Errorf("the Application is not the later rollout's any more: %v", live)
			}
			if len(h.rollouts.reads) != 0 {
				t.Errorf("rollouts read %v: the ordering tokens decided, no read was needed", h.rollouts.reads)
			}

			// And the later rollout's commands, redelivered too, are carried out over an
			// Application the earlier one wrote, whatever the starts say.
			h2 := newHarness(t)
			if res := h2.apply(t, applyCmd(h2.plan, "gpu-operator", 2)); res.Outcome != bus.OutcomeWritten {
				t.Fatalf("earlier rollout's write: %s (%s)", res.Outcome, res.Message)
			}
			if res := h2.apply(t, applyCmd(h2.plan, "gpu-operator", 1, later)); res.Outcome != bus.OutcomeRefreshed {
				t.Errorf("later rollout's apply: %s (%s), want Refreshed (carried out, same spec)", res.Outcome, res.Message)
			}
			if live := h2.apps.live("gpu-operator"); live.Annotations[v1alpha1.AnnotationStep] != "r-later/1" {
				t.Errorf("step annotation %q, want r-later/1", live.Annotations[v1alpha1.AnnotationStep])
			}
			if len(h2.rollouts.reads) != 0 {
				t.Errorf("rollouts read %v: the ordering tokens decided, no read was needed", h2.rollouts.reads)
			}
		})
	}
}

// When the Application or the command carries no ordering token (written before there were
// tokens, or by a repair decided from no rollout), the two cannot be ordered: a command of a
// rollout that has ended is Outdated, one of a rollout still running is carried out (no later
// rollout can have started while it runs). The steps' starts are never compared.
func TestUnorderedCommandsAskWhetherTheirRolloutEnded(t *testing.T) {
	other := func(c *bus.ApplyCommand) {
		// Written by an applier of the version before the tokens: no Seq, and a start that
		// says nothing (an hour after the command's own).
		c.Step = bus.StepRef{Rollout: "r-other", Index: 1, ID: "r-other/1", Started: testStarted.Add(time.Hour)}
		c.Header.ID = "r-other/1/1"
		c.Action = v1alpha1.ActionApply
	}
	for _, tc := range []struct {
		name  string
		ended map[string]v1alpha1.RolloutPhase
		want  string
	}{
		{"the command's rollout ended", map[string]v1alpha1.RolloutPhase{testRollout: v1alpha1.PhaseSucceeded}, bus.OutcomeOutdated},
		{"the command's rollout is gone", map[string]v1alpha1.RolloutPhase{testRollout: ""}, bus.OutcomeOutdated},
		{"the command's rollout runs", nil, bus.OutcomeRefreshed}, // carried out: the spec is the same
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			if res := h.apply(t, applyCmd(h.plan, "gpu-operator", 1, other)); res.Outcome != bus.OutcomeWritten {
				t.Fatalf("the other rollout's write: %s (%s)", res.Outcome, res.Message)
			}
			h.apps.writes()
			maps.Copy(h.rollouts.ended, tc.ended)
			res := h.apply(t, applyCmd(h.plan, "gpu-operator", 2))
			if res.Outcome != tc.want {
				t.Errorf("apply: %s (%s), want %s", res.Outcome, res.Message, tc.want)
			}
			if !slices.Contains(h.rollouts.reads, testRollout) {
				t.Errorf("rollouts read %v, want %s", h.rollouts.reads, testRollout)
			}
			if tc.want != bus.OutcomeOutdated {
				return
			}
			if writes := h.apps.writes(); len(writes) != 0 {
				t.Errorf("writes %v, want none", verbs(writes))
			}
			rm, err := h.w.Remove(context.Background(), removeCmd("gpu-operator", 3))
			if err != nil {
				t.Fatalf("remove: %v", err)
			}
			if rm.Outcome != bus.OutcomeOutdated || len(h.apps.writes()) != 0 {
				t.Errorf("remove: %s (%s), want Outdated and no write", rm.Outcome, rm.Message)
			}
		})
	}
}

// Create is create: an Application someone makes under the name between the writer's read
// (nothing there) and its write is never taken over. The create fails, the name is read again,
// and the namesake is Foreign, untouched.
func TestApplyNeverAdoptsANamesakeMadeAfterTheRead(t *testing.T) {
	h := newHarness(t)
	var theirs *argoapp.Application
	h.apps.before = func(verb string, c call) {
		h.apps.before = nil
		theirs = h.apps.create(&argoapp.Application{ObjectMeta: foreignMeta("gpu-operator")})
	}
	res := h.apply(t, applyCmd(h.plan, "gpu-operator", 1))
	if res.Outcome != bus.OutcomeForeign || res.Reason != v1alpha1.ReasonForeignObject || !strings.Contains(res.Message, "someone-else") {
		t.Errorf("result %s/%s %q; want Foreign/ForeignObject naming the label", res.Outcome, res.Reason, res.Message)
	}
	if diff := cmp.Diff([]string{createVerb}, verbs(h.apps.writes())); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if live := h.apps.live("gpu-operator"); live.ResourceVersion != theirs.ResourceVersion || ownerEvidence(live, testRuntimeUID) == "" {
		t.Errorf("the namesake was written: %+v", live.ObjectMeta)
	}
}

// A created Application's fields belong to the operator's apply, not to the create's Update
// entry: a field only an Update entry held would stay when a later apply stops stating it. The
// one Update entry left is the refresh handshake's merge patch, holding its two annotations.
func TestApplyCreateHandsTheFieldsToTheApply(t *testing.T) {
	h := newHarness(t)
	h.apply(t, applyCmd(h.plan, "gpu-operator", 1))
	var ours []string
	for _, e := range h.apps.live("gpu-operator").ManagedFields {
		if e.Manager != v1alpha1.FieldManager {
			continue
		}
		ours = append(ours, string(e.Operation))
		if e.Operation == metav1.ManagedFieldsOperationUpdate {
			want := `{"f:metadata":{"f:annotations":{"f:` + v1alpha1.AnnotationArgoRefresh + `":{},"f:` + v1alpha1.AnnotationRefreshFor + `":{}}}}`
			if e.FieldsV1 == nil || string(e.FieldsV1.Raw) != want {
				t.Errorf("the operator's Update entry holds %s; want the refresh handshake's annotations alone, %s", e.FieldsV1, want)
			}
		}
	}
	if diff := cmp.Diff([]string{string(metav1.ManagedFieldsOperationApply), string(metav1.ManagedFieldsOperationUpdate)}, ours); diff != "" {
		t.Errorf("the operator's managedFields entries (-want +got):\n%s", diff)
	}
}

// Every write after the apply is held to the UID of the Application written: one replaced by a
// namesake in between (deleted, and created by someone else) is read again and found Foreign,
// and the namesake gets neither the refresh nor the removal of a delete-rollout marker.
func TestApplyFollowUpWritesAreHeldToTheUID(t *testing.T) {
	for _, tc := range []struct {
		name string
		// marked puts a delete-rollout marker set by hand on the Application first, so the
		// write after the apply is the marker's removal; else it is the refresh patch.
		marked bool
	}{{"refresh", false}, {"marker removal", true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.ownedApp(t, "gpu-operator", 1)
			if tc.marked {
				h.apps.update("gpu-operator", func(a *argoapp.Application) {
					a.Annotations[v1alpha1.AnnotationDeleteRollout] = "by-hand"
				})
			}
			var theirs *argoapp.Application
			applies := 0
			h.apps.before = func(verb string, c call) {
				if verb != "patch" || c.PatchType != types.MergePatchType || applies > 0 {
					return
				}
				applies++
				h.apps.remove("gpu-operator")
				theirs = h.apps.create(&argoapp.Application{ObjectMeta: foreignMeta("gpu-operator")})
			}
			res := h.apply(t, applyCmd(h.plan, "gpu-operator", 2))
			if res.Outcome != bus.OutcomeForeign {
				t.Errorf("result %s (%s); want Foreign", res.Outcome, res.Message)
			}
			live := h.apps.live("gpu-operator")
			if theirs == nil || live.ResourceVersion != theirs.ResourceVersion || len(live.Annotations) != 0 {
				t.Errorf("the namesake was written: %+v", live.ObjectMeta)
			}
		})
	}
}

// repairCmd is a repair of release decided from basis, as the planner's drift check sends it:
// no rollout, no sequence, the Application it read as the ordering token.
func repairCmd(p *plan.Plan, release, tag string, basis *bus.Basis) *bus.ApplyCommand {
	return applyCmd(p, release, 0, func(c *bus.ApplyCommand) {
		c.Step = bus.StepRef{ID: "repair/abc/" + tag, Started: testStarted}
		c.Header.ID = c.Step.ID + "/" + release
		c.Action, c.Basis = v1alpha1.ActionApply, basis
	})
}

// basisOf is the basis a drift check that read app gives its repair.
func basisOf(app *argoapp.Application) *bus.Basis {
	if app == nil {
		return &bus.Basis{}
	}
	return &bus.Basis{UID: string(app.UID), ResourceVersion: app.ResourceVersion, Step: v1alpha1.AnnotatedStepToken(app.Annotations)}
}

// A repair is carried out only on the Application it was decided from: written by another step
// since, replaced, deleted, or created since the check found none, it is Outdated and nothing is
// written. Edits by anyone else since are no newer decision, and are forced back with the rest;
// the repair redelivered after its own write is carried out again (idempotent).
func TestARepairDecidedFromAnEarlierApplicationIsOutdated(t *testing.T) {
	const rel = "gpu-operator"
	outdated := func(t *testing.T, h *harness, cmd *bus.ApplyCommand, want string) {
		t.Helper()
		h.apps.writes()
		res := h.apply(t, cmd)
		if res.Outcome != bus.OutcomeOutdated || !strings.Contains(res.Message, want) {
			t.Errorf("repair %s: %s (%s), want Outdated naming %q", cmd.ID, res.Outcome, res.Message, want)
		}
		if w := h.apps.writes(); len(w) != 0 {
			t.Errorf("writes %v, want none", verbs(w))
		}
	}
	t.Run("written by a step since", func(t *testing.T) {
		h := newHarness(t)
		seen := h.ownedApp(t, rel, 1)
		h.ownedApp(t, rel, 2) // the next step wrote it after the check read it
		outdated(t, h, repairCmd(h.plan, rel, seen.ResourceVersion, basisOf(seen)), testRollout+"/2")
	})
	t.Run("replaced", func(t *testing.T) {
		h := newHarness(t)
		seen := h.ownedApp(t, rel, 1)
		h.apps.remove(rel)
		h.ownedApp(t, rel, 1)
		outdated(t, h, repairCmd(h.plan, rel, seen.ResourceVersion, basisOf(seen)), "is now UID")
	})
	t.Run("deleted", func(t *testing.T) {
		h := newHarness(t)
		seen := h.ownedApp(t, rel, 1)
		h.apps.remove(rel)
		outdated(t, h, repairCmd(h.plan, rel, seen.ResourceVersion, basisOf(seen)), "deleted since")
		if h.apps.live(rel) != nil {
			t.Error("the repair of a deleted Application's edit created it again")
		}
	})
	t.Run("created since the check found none", func(t *testing.T) {
		h := newHarness(t)
		h.ownedApp(t, rel, 1)
		outdated(t, h, repairCmd(h.plan, rel, "gone-x", basisOf(nil)), "decided from no Application")
	})
	t.Run("the one it was decided from", func(t *testing.T) {
		h := newHarness(t)
		if res := h.apply(t, repairCmd(h.plan, rel, "gone-x", basisOf(nil))); res.Outcome != bus.OutcomeWritten {
			t.Fatalf("repair of a deleted Application: %s (%s), want Written", res.Outcome, res.Message)
		}
		h.ownedApp(t, rel, 1)
		seen := h.apps.live(rel)
		h.apps.update(rel, func(a *argoapp.Application) {
			a.Spec.Source.Helm.ValuesObject = &runtime.RawExtension{Raw: []byte(`{"message":"hand"}`)}
		})
		cmd := repairCmd(h.plan, rel, seen.ResourceVersion, basisOf(seen))
		for range 2 { // and redelivered after its write
			if res := h.apply(t, cmd); res.Outcome != bus.OutcomeWritten && res.Outcome != bus.OutcomeRefreshed {
				t.Fatalf("repair decided from the live Application: %s (%s)", res.Outcome, res.Message)
			}
		}
		live := h.apps.live(rel)
		if live.Annotations[v1alpha1.AnnotationStep] != cmd.Step.ID || strings.Contains(string(live.Spec.Source.Helm.ValuesObject.Raw), "hand") {
			t.Errorf("step %s, values %s: want the repair's write, the edit forced back", live.Annotations[v1alpha1.AnnotationStep], live.Spec.Source.Helm.ValuesObject.Raw)
		}
	})
}
