package fences

import (
	"cmp"
	"fmt"
	"reflect"
	"strings"
	"time"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// maxMessage is the longest fence message the RuntimeRollout CRD accepts.
const maxMessage = 1024

// Health status codes as Argo CD writes them into status.health.status.
const (
	healthHealthy     = "Healthy"
	healthProgressing = "Progressing"
	healthDegraded    = "Degraded"
	healthMissing     = "Missing"
	healthSuspended   = "Suspended"
)

// retryMarker starts the part of operationState.message Argo CD writes when an attempt failed
// and a retry is scheduled ("... Retrying attempt #2 at 4:42AM.").
const retryMarker = "Retrying attempt #"

// Verdict is the judgement of one observation.
type Verdict struct {
	// Ready is true when every fence passed.
	Ready bool
	// Failed is true when a fence failed: it will not pass without a change.
	Failed bool
	// Fences in evaluation order.
	Fences []v1alpha1.Fence
	// Observed summarises the status judged.
	Observed bus.ObservedStatus
}

// Fence returns the named fence, or false when the verdict has none of that name.
func (v Verdict) Fence(name string) (v1alpha1.Fence, bool) {
	for _, f := range v.Fences {
		if f.Name == name {
			return f, true
		}
	}
	return v1alpha1.Fence{}, false
}

// Summary is one line naming the fences that have not passed, for logs and people.
func (v Verdict) Summary() string {
	if v.Ready {
		return "ready"
	}
	var parts []string
	for _, f := range v.Fences {
		if f.State != v1alpha1.FencePassed {
			parts = append(parts, fmt.Sprintf("%s %s: %s", f.Name, f.State, f.Message))
		}
	}
	return strings.Join(parts, "; ")
}

// step is what the annotations say about the step that last wrote the Application.
type step struct {
	id         string
	token      string // v1alpha1.StepToken: refresh-for and our sync's info carry it
	write      string
	refreshFor string
	refreshing bool
	gate       bool
}

func stepOf(app *argoapp.Application) step {
	a := app.Annotations
	_, refreshing := a[v1alpha1.AnnotationArgoRefresh]
	return step{
		id:         a[v1alpha1.AnnotationStep],
		token:      v1alpha1.AnnotatedStepToken(a),
		write:      a[v1alpha1.AnnotationStepWrite],
		refreshFor: a[v1alpha1.AnnotationRefreshFor],
		refreshing: refreshing,
		gate:       a[v1alpha1.AnnotationReadinessGate] == "true",
	}
}

// Plan is what the plan says an Application must be: the release as appspec.Build renders it
// from the plan the Application's plan-digest annotation names.
type Plan struct {
	// Digest is the plan's digest.
	Digest string
	// Want is the rendered Application; nil when it cannot be rendered.
	Want *argoapp.Application
	// Missing says why Want is nil ("plan sha256:... is not stored", ...).
	Missing string
}

// Evaluate judges app against what plan says it must be. It reads only its arguments; it never
// fails: what cannot be judged is an Open or Failed fence with a message saying why. A live
// spec whose source (values included) or destination differs from the plan's is never judged:
// an edit by hand, even one Argo CD synced and found healthy, is not the plan rolled out.
func Evaluate(app *argoapp.Application, plan Plan) Verdict {
	st := stepOf(app)
	names := []string{v1alpha1.FenceComparedToSpec, v1alpha1.FenceSyncedAtRevision, v1alpha1.FenceSyncedAfterStep, v1alpha1.FenceHealthy, v1alpha1.FenceNoErrorCondition}
	if st.gate {
		names = append(names, v1alpha1.FenceGateSynced)
	}
	var fs []v1alpha1.Fence
	if g, ok := guard(app, plan); ok {
		fs = append(fs, g)
		for _, n := range names[1:] {
			fs = append(fs, open(n, v1alpha1.FenceNotJudged+": "+g.Message))
		}
	} else {
		compared := comparedToSpec(app)
		trusted := compared.State == v1alpha1.FencePassed
		fs = append(fs,
			compared,
			syncedAtRevision(app, trusted),
			syncedAfterStep(app, st, trusted),
			healthy(app, trusted),
			noErrorCondition(app, trusted),
		)
		if st.gate {
			fs = append(fs, gateSynced(app, st))
		}
	}
	v := Verdict{Ready: true, Fences: fs, Observed: observed(app)}
	for i := range v.Fences {
		v.Fences[i].Message = truncate(v.Fences[i].Message)
		switch v.Fences[i].State {
		case v1alpha1.FencePassed:
		case v1alpha1.FenceFailed:
			v.Failed = true
			v.Ready = false
		default:
			v.Ready = false
		}
	}
	return v
}

// guard returns the ComparedToSpec fence of an Application readiness cannot judge at all, and
// false for one it can.
func guard(app *argoapp.Application, plan Plan) (v1alpha1.Fence, bool) {
	name := v1alpha1.FenceComparedToSpec
	switch {
	case app.DeletionTimestamp != nil:
		return open(name, "the Application is being deleted (deletionTimestamp is set)"), true
	case len(app.Spec.Sources) > 0:
		return failed(name, fmt.Sprintf("spec.sources holds %d sources: aicr-operator writes exactly one spec.source and cannot judge a multi-source Application; remove spec.sources (the operator writes spec.source again on its next write)", len(app.Spec.Sources))), true
	case app.Spec.Source == nil:
		return failed(name, "spec.source is missing: aicr-operator writes one OCI Helm source pinned by digest; the Application was changed by hand"), true
	case plan.Want == nil || plan.Want.Spec.Source == nil:
		return open(name, "what the plan says this Application must be is not known: "+cmp.Or(plan.Missing, "no plan was given")+"; readiness judges an Application only against its plan"), true
	}
	if diffs := planDiffs(app, plan.Want); len(diffs) > 0 {
		msg := fmt.Sprintf("the Application's spec is not what plan %s says: it differs in %s (edited by hand; drift is reported); an edit is never judged, even once Argo CD synced it: undo it, or change the runtime instead",
			short(plan.Digest), strings.Join(diffs, ", "))
		if ct := app.Status.Sync.ComparedTo; appspec.EqualSource(&ct.Source, app.Spec.Source) && appspec.EqualDestination(ct.Destination, app.Spec.Destination) {
			// Whether the edit is live in the cluster matters to the person who made it.
			msg += fmt.Sprintf("; Argo CD compared the edit: %s, health %s", cmp.Or(syncDesc(app.Status.Sync), "no sync status"), cmp.Or(string(app.Status.Health.Status), "not reported"))
			if os := app.Status.OperationState; os != nil && os.Phase != "" && os.SyncResult != nil && appspec.EqualSource(&os.SyncResult.Source, app.Spec.Source) {
				msg += fmt.Sprintf(", its sync %s", os.Phase)
			}
		}
		return open(name, msg), true
	}
	return v1alpha1.Fence{}, false
}

// planDiffs names where the live source (values included) and destination differ from the
// plan's.
func planDiffs(app, want *argoapp.Application) []string {
	var diffs []string
	got, exp := app.Spec.Source, want.Spec.Source
	switch {
	case got.RepoURL != exp.RepoURL:
		diffs = append(diffs, fmt.Sprintf("repoURL %s (plan %s)", got.RepoURL, exp.RepoURL))
	case got.Chart != exp.Chart:
		diffs = append(diffs, fmt.Sprintf("chart %q (plan %q)", got.Chart, exp.Chart))
	case got.Path != exp.Path:
		diffs = append(diffs, fmt.Sprintf("path %q (plan %q)", got.Path, exp.Path))
	}
	if got.TargetRevision != exp.TargetRevision {
		diffs = append(diffs, fmt.Sprintf("targetRevision %s (plan %s)", short(got.TargetRevision), short(exp.TargetRevision)))
	}
	if len(diffs) == 0 && !appspec.EqualSource(got, exp) {
		diffs = append(diffs, "helm.valuesObject")
	}
	if !appspec.EqualDestination(app.Spec.Destination, want.Spec.Destination) {
		diffs = append(diffs, fmt.Sprintf("destination %s (plan %s)", dest(app.Spec.Destination), dest(want.Spec.Destination)))
	}
	return diffs
}

func comparedToSpec(app *argoapp.Application) v1alpha1.Fence {
	name := v1alpha1.FenceComparedToSpec
	ct := app.Status.Sync.ComparedTo
	spec := app.Spec.Source
	if ct.Source.RepoURL == "" && ct.Destination.Server == "" && ct.Destination.Name == "" {
		return open(name, "Argo CD has not compared this Application yet (status.sync.comparedTo is empty)")
	}
	var diffs []string
	switch {
	case ct.Source.RepoURL != spec.RepoURL:
		diffs = append(diffs, fmt.Sprintf("repoURL %s (spec %s)", ct.Source.RepoURL, spec.RepoURL))
	case ct.Source.Chart != spec.Chart:
		diffs = append(diffs, fmt.Sprintf("chart %q (spec %q)", ct.Source.Chart, spec.Chart))
	case ct.Source.Path != spec.Path:
		diffs = append(diffs, fmt.Sprintf("path %q (spec %q)", ct.Source.Path, spec.Path))
	}
	if ct.Source.TargetRevision != spec.TargetRevision {
		diffs = append(diffs, fmt.Sprintf("targetRevision %s (spec %s)", short(ct.Source.TargetRevision), short(spec.TargetRevision)))
	}
	if len(diffs) == 0 && !appspec.EqualSource(&ct.Source, spec) {
		diffs = append(diffs, "helm.valuesObject")
	}
	if !appspec.EqualDestination(ct.Destination, app.Spec.Destination) {
		diffs = append(diffs, fmt.Sprintf("destination %s (spec %s)", dest(ct.Destination), dest(app.Spec.Destination)))
	}
	if !equalIgnore(ct.IgnoreDifferences, app.Spec.IgnoreDifferences) {
		// A write that changed only the comparison exceptions is compared once comparedTo
		// shows the new ones (Argo CD refreshes when they differ and copies them in).
		diffs = append(diffs, "ignoreDifferences")
	}
	if len(diffs) > 0 {
		return open(name, "the status describes an earlier spec: comparedTo differs in "+strings.Join(diffs, ", ")+"; waiting for Argo CD to compare the written spec (under a second on an idle controller)")
	}
	return passed(name, fmt.Sprintf("Argo CD compared the written spec (%s with its values, to %s)", short(spec.TargetRevision), dest(app.Spec.Destination)))
}

// equalIgnore compares comparison exceptions as Argo CD does: nil and empty are the same.
func equalIgnore(a, b argoapp.IgnoreDifferences) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

func syncedAtRevision(app *argoapp.Application, trusted bool) v1alpha1.Fence {
	name := v1alpha1.FenceSyncedAtRevision
	s := app.Status.Sync
	want := app.Spec.Source.TargetRevision
	if !trusted {
		return open(name, untrusted("sync status", syncDesc(s)))
	}
	switch s.Status {
	case argoapp.SyncStatusCodeSynced:
		if s.Revision != want {
			return open(name, fmt.Sprintf("Synced at %s, but the plan's chart digest is %s", short(s.Revision), short(want)))
		}
		return passed(name, "Synced at "+short(want))
	case argoapp.SyncStatusCodeOutOfSync:
		msg := fmt.Sprintf("OutOfSync at %s: the cluster does not match the written spec yet", short(s.Revision))
		if !automated(app) {
			msg += "; automated sync is off, so Argo CD will not sync by itself"
		}
		return open(name, msg)
	case argoapp.SyncStatusCodeUnknown:
		return open(name, "sync status Unknown: Argo CD could not compare the spec with the cluster (see "+v1alpha1.FenceNoErrorCondition+")")
	}
	return open(name, "Argo CD has not reported a sync status yet")
}

// syncedAfterStep: Argo CD looked at the written spec after the step began, and either a sync
// of it succeeded or the comparison found nothing to sync. The proof of "after" is the refresh
// handshake the applier starts after every step's write, changed or not: refresh-for names the
// step and Argo CD removed its refresh request, which it does only when it saves a comparison
// of the Application as it stood with the request. A status whose comparedTo equals the
// written spec is no such proof: Argo CD may have compared that spec before the step (a hand
// edit to the same values, or the Application the step's create replaced, whose status Argo CD
// saves by name).
func syncedAfterStep(app *argoapp.Application, st step, trusted bool) v1alpha1.Fence {
	name := v1alpha1.FenceSyncedAfterStep
	if st.id == "" {
		return open(name, "the Application carries no "+v1alpha1.AnnotationStep+" annotation: there is no step to judge it against")
	}
	what := "wrote the spec"
	switch st.write {
	case v1alpha1.StepWriteChanged:
	case v1alpha1.StepWriteUnchanged:
		// The step changed nothing, so no sync need follow: the sync that put the cluster at
		// this spec may predate the step.
		what = "changed nothing"
	default:
		return open(name, fmt.Sprintf("annotation %s is %q: expected %s or %s (written by the applier with the step)", v1alpha1.AnnotationStepWrite, st.write, v1alpha1.StepWriteChanged, v1alpha1.StepWriteUnchanged))
	}
	if st.refreshFor != st.token {
		was := st.refreshFor
		if was == "" {
			was = "absent"
		}
		return open(name, fmt.Sprintf("step %s %s; waiting for its refresh request (%s is %s)", st.id, what, v1alpha1.AnnotationRefreshFor, was))
	}
	if st.refreshing {
		return open(name, fmt.Sprintf("step %s %s; Argo CD has not compared since (its refresh request %s is still set)", st.id, what, v1alpha1.AnnotationArgoRefresh))
	}
	spec := app.Spec.Source
	os := app.Status.OperationState
	if os != nil && os.Phase == argoapp.OperationRunning {
		// .operation stays set while an operation runs, between retries too.
		if isRetryWait(os) {
			return open(name, "a sync attempt failed and Argo CD will retry: "+os.Message)
		}
		return open(name, "the sync is running"+suffix(os.Message))
	}
	if op := app.Operation; op != nil {
		return open(name, fmt.Sprintf("a sync operation initiated by %s is requested and has not started", op.InitiatedBy.Describe()))
	}
	refreshed := fmt.Sprintf("; Argo CD compared again after step %s's refresh", st.id)
	if os != nil {
		switch os.Phase {
		case argoapp.OperationTerminating:
			return open(name, "the sync is being terminated"+suffix(os.Message))
		case argoapp.OperationFailed, argoapp.OperationError:
			// A failed hook leaves the Application Synced and Healthy with no condition: only
			// this fence shows it, so no comparison can pass it.
			if forSpec(os, spec) {
				return failed(name, fmt.Sprintf("the sync of %s failed (%s)%s; Argo CD does not retry it on its own: fix the cause and roll out again", short(spec.TargetRevision), os.Phase, suffix(os.Message)))
			}
		case argoapp.OperationSucceeded:
			if sr := os.SyncResult; sr != nil && sr.Revision == spec.TargetRevision && appspec.EqualSource(&sr.Source, spec) {
				msg := fmt.Sprintf("the sync of %s with the written values succeeded", short(spec.TargetRevision))
				if os.FinishedAt != nil {
					msg += " at " + os.FinishedAt.UTC().Format(time.RFC3339)
				}
				return passed(name, msg+refreshed)
			}
		default:
			return open(name, fmt.Sprintf("operation phase %q", os.Phase))
		}
	}
	// No sync of the written spec finished. Argo CD starts none when the cluster already
	// matches it (new values that render the same manifests, resources that already exist,
	// a change that touches only hooks): a comparison of the written spec after the step
	// began that found it Synced is the "reconcile" that proves the step.
	s := app.Status.Sync
	if trusted && s.Status == argoapp.SyncStatusCodeSynced && s.Revision == spec.TargetRevision {
		msg := fmt.Sprintf("Argo CD compared the written spec at %s after the step began and found the cluster matching it, so there was nothing to sync", short(spec.TargetRevision))
		if st.gate {
			msg += " (a readiness release still needs its own sync: " + v1alpha1.FenceGateSynced + ")"
		}
		return passed(name, msg+refreshed)
	}
	switch {
	case os == nil:
		return open(name, "no sync operation has run for this spec yet")
	case os.Phase == argoapp.OperationFailed || os.Phase == argoapp.OperationError:
		return open(name, fmt.Sprintf("the last sync (%s, of an earlier spec) ended %s; waiting for a sync of the written spec", syncedDesc(os), os.Phase))
	case os.SyncResult == nil:
		return open(name, "the last operation succeeded without a sync result; waiting for a sync of the written spec")
	case os.SyncResult.Revision != spec.TargetRevision:
		return open(name, fmt.Sprintf("the last sync applied %s, the spec is %s; waiting for Argo CD to compare or sync the written spec", short(os.SyncResult.Revision), short(spec.TargetRevision)))
	}
	return open(name, "the last sync applied other values or another source than the written spec; waiting for Argo CD to compare or sync the written spec")
}

func healthy(app *argoapp.Application, trusted bool) v1alpha1.Fence {
	name := v1alpha1.FenceHealthy
	h := string(app.Status.Health.Status)
	if !trusted {
		return open(name, untrusted("health", h))
	}
	switch h {
	case healthHealthy:
		if hasCondition(app, argoapp.ApplicationConditionComparisonError) {
			return open(name, "health reads Healthy, but Argo CD could not compare (ComparisonError), so no resource was assessed")
		}
		return passed(name, "Healthy")
	case healthProgressing:
		return open(name, "Progressing: some resources are not healthy yet (a rollout in progress, pods starting)")
	case healthDegraded:
		return open(name, "Degraded: some resources are failing; see the Application's resource tree in Argo CD")
	case healthMissing:
		return open(name, "Missing: the release's resources do not exist yet")
	case healthSuspended:
		return open(name, "Suspended: a resource is paused or suspended")
	case "":
		return open(name, "Argo CD has not reported health yet")
	}
	return open(name, "health "+h)
}

// errorConditions are the condition types that mean the spec cannot be compared or synced.
var errorConditions = []string{
	argoapp.ApplicationConditionComparisonError,
	argoapp.ApplicationConditionSyncError,
	argoapp.ApplicationConditionInvalidSpecError,
}

func noErrorCondition(app *argoapp.Application, trusted bool) v1alpha1.Fence {
	name := v1alpha1.FenceNoErrorCondition
	var found []string
	for _, c := range app.Status.Conditions {
		for _, t := range errorConditions {
			if c.Type == t {
				found = append(found, c.Type+": "+c.Message)
			}
		}
	}
	if len(found) == 0 {
		return passed(name, "no ComparisonError, SyncError or InvalidSpecError")
	}
	msg := strings.Join(found, "; ")
	switch {
	case !trusted:
		// Until comparedTo shows the written spec, a condition may be left from an earlier one.
		return open(name, msg+" (may describe an earlier spec: waiting for "+v1alpha1.FenceComparedToSpec+")")
	case app.Operation != nil || (app.Status.OperationState != nil && app.Status.OperationState.Phase == argoapp.OperationRunning):
		return open(name, msg+" (a sync is pending or running and may clear it)")
	}
	return failed(name, msg)
}

func gateSynced(app *argoapp.Application, st step) v1alpha1.Fence {
	name := v1alpha1.FenceGateSynced
	if st.id == "" {
		return open(name, "the Application carries no "+v1alpha1.AnnotationStep+" annotation: there is no step whose sync to wait for")
	}
	os := app.Status.OperationState
	running := os != nil && os.Phase == argoapp.OperationRunning
	if op := app.Operation; op != nil && !(running && ours(os.Operation, st.token)) {
		if ours(*op, st.token) {
			return open(name, fmt.Sprintf("the sync operation of step %s is requested; Argo CD has not started it", st.id))
		}
		return open(name, fmt.Sprintf("another operation (initiated by %s) is requested; the applier starts the sync of step %s once it ends", op.InitiatedBy.Describe(), st.id))
	}
	if os == nil || !ours(os.Operation, st.token) {
		last := "none"
		if os != nil {
			last = fmt.Sprintf("initiated by %s%s, %s", os.Operation.InitiatedBy.Describe(), stepInfo(os.Operation), os.Phase)
		}
		return open(name, fmt.Sprintf("waiting for the sync operation of step %s, initiated by %s (the applier starts it); last operation: %s", st.id, v1alpha1.FieldManager, last))
	}
	switch os.Phase {
	case argoapp.OperationSucceeded:
		return passed(name, fmt.Sprintf("the sync operation of step %s succeeded", st.id))
	case argoapp.OperationFailed, argoapp.OperationError:
		return failed(name, fmt.Sprintf("the sync operation of step %s ended %s%s", st.id, os.Phase, suffix(os.Message)))
	case argoapp.OperationRunning:
		if isRetryWait(os) {
			return open(name, fmt.Sprintf("an attempt of step %s's sync failed and Argo CD will retry: %s", st.id, os.Message))
		}
		return open(name, fmt.Sprintf("the sync operation of step %s is running%s", st.id, suffix(os.Message)))
	}
	return open(name, fmt.Sprintf("the sync operation of step %s is %s", st.id, os.Phase))
}

// ours reports whether op is the explicit sync aicr-operator started for the step token.
func ours(op argoapp.Operation, token string) bool {
	return op.InitiatedBy.Username == v1alpha1.FieldManager && appspec.HasStepInfo(op.Info, token)
}

func stepInfo(op argoapp.Operation) string {
	for _, i := range op.Info {
		if i != nil && i.Name == appspec.StepInfoName {
			return " for step " + i.Value
		}
	}
	return ""
}

// forSpec reports whether a finished operation was a sync of spec: its result (or, when it
// produced none, its request) names the same revision and source.
func forSpec(os *argoapp.OperationState, spec *argoapp.ApplicationSource) bool {
	if sr := os.SyncResult; sr != nil && sr.Revision != "" {
		return sr.Revision == spec.TargetRevision && appspec.EqualSource(&sr.Source, spec)
	}
	sync := os.Operation.Sync
	if sync == nil || sync.Revision != spec.TargetRevision {
		return false
	}
	return sync.Source == nil || appspec.EqualSource(sync.Source, spec)
}

func isRetryWait(os *argoapp.OperationState) bool {
	return strings.Contains(os.Message, retryMarker)
}

func hasCondition(app *argoapp.Application, t string) bool {
	for _, c := range app.Status.Conditions {
		if c.Type == t {
			return true
		}
	}
	return false
}

func automated(app *argoapp.Application) bool {
	sp := app.Spec.SyncPolicy
	if sp == nil || sp.Automated == nil {
		return false
	}
	return sp.Automated.Enabled == nil || *sp.Automated.Enabled
}

func observed(app *argoapp.Application) bus.ObservedStatus {
	o := bus.ObservedStatus{
		SyncStatus:      string(app.Status.Sync.Status),
		Revision:        app.Status.Sync.Revision,
		Health:          string(app.Status.Health.Status),
		ResourceVersion: app.ResourceVersion,
	}
	if os := app.Status.OperationState; os != nil {
		o.OperationPhase = string(os.Phase)
	}
	if t := app.Status.ReconciledAt; t != nil {
		u := t.UTC()
		o.ReconciledAt = &u
	}
	return o
}

// untrusted is the message of a fence whose status field cannot be believed before
// ComparedToSpec passes.
func untrusted(what, shown string) string {
	if shown == "" {
		return v1alpha1.FenceNotJudged + " until " + v1alpha1.FenceComparedToSpec + " passes"
	}
	return fmt.Sprintf("%s until %s passes: the %s (%s) is from the comparison of an earlier spec", v1alpha1.FenceNotJudged, v1alpha1.FenceComparedToSpec, what, shown)
}

func syncDesc(s argoapp.SyncStatus) string {
	if s.Status == "" {
		return ""
	}
	if s.Revision == "" {
		return string(s.Status)
	}
	return fmt.Sprintf("%s at %s", s.Status, short(s.Revision))
}

func syncedDesc(os *argoapp.OperationState) string {
	if os.SyncResult != nil && os.SyncResult.Revision != "" {
		return "of " + short(os.SyncResult.Revision)
	}
	if os.Operation.Sync != nil && os.Operation.Sync.Revision != "" {
		return "to " + short(os.Operation.Sync.Revision)
	}
	return "of an unknown revision"
}

func dest(d argoapp.ApplicationDestination) string {
	server := d.Server
	if server == "" {
		server = d.Name
	}
	return fmt.Sprintf("namespace %q on %s", d.Namespace, server)
}

// short abbreviates a digest to sha256: and 12 hex digits; anything else is returned whole.
func short(rev string) string {
	const prefix = "sha256:"
	if strings.HasPrefix(rev, prefix) && len(rev) > len(prefix)+12 {
		return rev[:len(prefix)+12]
	}
	if rev == "" {
		return `""`
	}
	return rev
}

func suffix(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}

func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage - len("…")
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

func passed(name, msg string) v1alpha1.Fence {
	return v1alpha1.Fence{Name: name, State: v1alpha1.FencePassed, Message: msg}
}

func open(name, msg string) v1alpha1.Fence {
	return v1alpha1.Fence{Name: name, State: v1alpha1.FenceOpen, Message: msg}
}

func failed(name, msg string) v1alpha1.Fence {
	return v1alpha1.Fence{Name: name, State: v1alpha1.FenceFailed, Message: msg}
}
