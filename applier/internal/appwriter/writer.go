package appwriter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	"github.com/aicr-run/aicr-operator/servicekit/logging"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

// Delays of the "not yet" outcomes: the command is redelivered after them.
const (
	// OperationBusyRetry is how long a readiness release's sync waits when another operation
	// is set or running on its Application.
	OperationBusyRetry = 2 * time.Second
	// DeletionPollInterval is how often a Remove (or an Apply meeting a deleting Application)
	// looks again while Argo CD deletes the release's resources.
	DeletionPollInterval = time.Second
)

// RemoveFieldManager owns the delete-rollout annotation and the resources finalizer that a
// Remove step adds. It is not v1alpha1.FieldManager because an apply by that manager states
// the whole Application: one carrying only the two removal fields would drop the spec.
const RemoveFieldManager = v1alpha1.FieldManager + "-remove"

// Applications is the Application API of the engine namespace; *argoapp.Applications satisfies
// it. There is no Update on purpose: the Application read here lacks every field argoapp does
// not declare, so the writer only ever creates and server-side applies what it built and
// merge-patches named fields (see package argoapp).
type Applications interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*argoapp.Application, error)
	Create(ctx context.Context, body []byte, opts metav1.CreateOptions) (*argoapp.Application, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*argoapp.Application, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// Cache is a read of the engine namespace's owned Applications that may lag the API server: an
// informer's store (see NewCache). A hit saves the GET before a write. It is never trusted for
// a decision that does not end in a write guarded by the object's resourceVersion (a refusal,
// a wait): those are read again from the API server, and so is every retry after a conflict.
type Cache interface {
	// Get returns the cached Application of a name, or false.
	Get(name string) (*argoapp.Application, bool)
}

// Publisher sends a result; *bus.Publisher satisfies it.
type Publisher interface {
	Publish(ctx context.Context, subject, id string, m bus.Envelope) error
}

// Config is what a Writer needs.
type Config struct {
	// Apps is the Application API of the engine namespace.
	Apps Applications
	// Cache, when set, serves the read before an apply (nil: every write reads with a GET).
	Cache Cache
	// Plans loads plans by digest (plan.GetLoader of the operator namespace's ConfigMaps).
	Plans *plan.Cache
	// Publisher sends results.
	Publisher Publisher
	// Settings are the installation values every Application depends on.
	Settings appspec.Settings
	// Registerer receives the writer's metrics; nil for none.
	Registerer prometheus.Registerer
	// Rollouts says whether a command's rollout has ended (see outdatedBy).
	Rollouts Rollouts
}

// Writer handles ApplyCommand and RemoveCommand.
type Writer struct {
	apps     Applications
	cache    Cache
	plans    *plan.Cache
	pub      Publisher
	settings appspec.Settings
	rollouts Rollouts
	outcomes *prometheus.CounterVec
}

// New returns a Writer.
func New(c Config) (*Writer, error) {
	if c.Apps == nil || c.Plans == nil || c.Publisher == nil || c.Rollouts == nil {
		return nil, errors.New("new writer: Apps, Plans, Publisher and Rollouts are required")
	}
	if err := c.Settings.Validate(); err != nil {
		return nil, fmt.Errorf("new writer: %w", err)
	}
	w := &Writer{apps: c.Apps, cache: c.Cache, plans: c.Plans, pub: c.Publisher, settings: c.Settings, rollouts: c.Rollouts,
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: v1alpha1.BinaryApplier, Name: "results_total",
			Help: "Command results published, by action and outcome.",
		}, []string{"action", "outcome"}),
	}
	if c.Registerer != nil {
		if err := c.Registerer.Register(w.outcomes); err != nil {
			return nil, fmt.Errorf("register writer metrics: %w", err)
		}
	}
	return w, nil
}

// Routes are the dispatch routes of the applier's commands.
func (w *Writer) Routes() dispatch.Routes {
	return dispatch.Routes{
		bus.TypeApplyCommand:  w.HandleApply,
		bus.TypeRemoveCommand: w.HandleRemove,
	}
}

// HandleApply handles one ApplyCommand and publishes its result.
func (w *Writer) HandleApply(ctx context.Context, m *dispatch.Message) error {
	var cmd bus.ApplyCommand
	if err := m.Decode(&cmd); err != nil {
		return err
	}
	ctx = enrich(ctx, cmd.Runtime, cmd.Release, cmd.Step.ID)
	res, err := w.Apply(ctx, &cmd)
	if err != nil {
		return err
	}
	return w.publish(ctx, res)
}

// HandleRemove handles one RemoveCommand and publishes its result.
func (w *Writer) HandleRemove(ctx context.Context, m *dispatch.Message) error {
	var cmd bus.RemoveCommand
	if err := m.Decode(&cmd); err != nil {
		return err
	}
	ctx = enrich(ctx, cmd.Runtime, cmd.Release, cmd.Step.ID)
	res, err := w.Remove(ctx, &cmd)
	if err != nil {
		return err
	}
	return w.publish(ctx, res)
}

func enrich(ctx context.Context, runtime, release, step string) context.Context {
	l := dispatch.LoggerFields(logging.From(ctx).With(), runtime, release, step).Logger()
	return logging.Into(ctx, l)
}

func (w *Writer) publish(ctx context.Context, res *bus.ApplyResult) error {
	if err := w.pub.Publish(ctx, bus.AppliedSubject(res.Runtime, res.Release), res.CommandID+"/result", res); err != nil {
		return err
	}
	w.outcomes.WithLabelValues(string(res.Action), res.Outcome).Inc()
	ev := logging.From(ctx).Info()
	if res.Outcome == bus.OutcomeFailed || res.Outcome == bus.OutcomeForeign || res.Outcome == bus.OutcomeBlocked {
		ev = logging.From(ctx).Warn().Str(logging.KeyReason, res.Reason).Str("detail", res.Message)
	}
	ev.Str(logging.KeyOutcome, res.Outcome).Str("action", string(res.Action)).Msg("publish result")
	return nil
}

// Apply writes the command's Application and returns the result to publish. An error is a
// dispatch.NotYetError (an operation is in the way, or the Application is being deleted) or a
// transient failure to retry; every final answer, including refusals, is a result.
func (w *Writer) Apply(ctx context.Context, cmd *bus.ApplyCommand) (*bus.ApplyResult, error) {
	if err := cmd.Validate(); err != nil {
		return applyResult(cmd, bus.OutcomeFailed, bus.ResultReasonInvalidCommand, err.Error(), nil), nil
	}
	p, err := w.plans.Get(ctx, cmd.PlanDigest)
	if err != nil {
		if plan.IsUnreadable(err) {
			return applyResult(cmd, bus.OutcomeFailed, bus.ResultReasonPlanUnreadable, err.Error(), nil), nil
		}
		return nil, err
	}
	rel, ok := p.Release(cmd.Release)
	if !ok {
		return applyResult(cmd, bus.OutcomeFailed, bus.ResultReasonPlanUnreadable,
			fmt.Sprintf("plan %s has no release %q", cmd.PlanDigest, cmd.Release), nil), nil
	}
	desired, err := appspec.Build(w.settings, appspec.Input{
		Runtime: cmd.Runtime, RuntimeUID: cmd.RuntimeUID, PlanDigest: cmd.PlanDigest, Release: rel,
		StepID: cmd.Step.ID, StepStarted: cmd.Step.Started, StepRolloutUID: cmd.Step.RolloutUID, StepSeq: cmd.Step.Seq, SuspendEngine: cmd.SuspendEngine,
	})
	if err != nil {
		return applyResult(cmd, bus.OutcomeFailed, bus.ResultReasonPlanUnreadable, err.Error(), nil), nil
	}
	gate := rel.ReadinessGate
	if w.cache != nil {
		res, err := w.applyOnce(ctx, cmd, desired, gate, true)
		switch {
		case err == nil:
			return res, nil
		case !errors.Is(err, errStale) && !apierrors.IsConflict(err):
			return nil, err
		}
		// The cached object was stale, or changed before the guarded write: read it from the
		// API server below.
	}
	var res *bus.ApplyResult
	// A conflict means the Application changed between the read and a guarded write (Argo CD
	// writes status often, or it was replaced): read it again and decide again.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		res, err = w.applyOnce(ctx, cmd, desired, gate, false)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// errStale says a decision made on the cached Application must be made again on a fresh read.
var errStale = errors.New("decided on a cached application")

// applyOnce reads the Application (from the cache when cached is set and it has it), decides
// (decideApply) and writes (writeApplication). Every write of the spec is guarded by the read's
// resourceVersion, so a stale read ends in a conflict; a decision that writes nothing returns
// errStale when it was made on the cache.
func (w *Writer) applyOnce(ctx context.Context, cmd *bus.ApplyCommand, desired *argoapp.Application, gate, cached bool) (*bus.ApplyResult, error) {
	name, stepID := desired.Name, cmd.Step.ID
	// token names this rollout's step where the step ID may also name a namesake rollout's.
	token := v1alpha1.StepToken(stepID, cmd.Step.RolloutUID)
	var live *argoapp.Application
	fromCache := false
	if cached {
		live, fromCache = w.cache.Get(name)
	}
	if !fromCache {
		var err error
		if live, err = w.get(ctx, name); err != nil {
			return nil, err
		}
	}
	f := applyFacts{live: live, fromCache: fromCache, cmd: cmd, token: token}
	act, why := decideApply(f)
	for ; act == applyAskEnded || act == applyAskArmed; act, why = decideApply(f) {
		var answer string
		var err error
		if act == applyAskEnded {
			// Asked of the API server, whatever the read: while the command's rollout runs no
			// later rollout has written the Application, so a cached copy older than the live
			// one changes nothing here, and the write, guarded by the copy's resourceVersion,
			// conflicts and is decided again on a fresh read. (Only an Application or a command
			// without an ordering token gets here: one written before the tokens, or by a repair
			// decided from no rollout.)
			answer, err = w.rolloutEnded(ctx, cmd.Step, live.Annotations[v1alpha1.AnnotationStep])
			f.ended = &answer
		} else {
			answer, err = w.armed(ctx, live)
			f.unarmed = &answer
		}
		if err != nil {
			return nil, err
		}
	}
	switch act {
	case applyStale:
		return nil, errStale
	case applyForeign:
		return applyResult(cmd, bus.OutcomeForeign, v1alpha1.ReasonForeignObject, w.foreignMessage(live, why), nil), nil
	case applyOutdated:
		if live == nil {
			logging.From(ctx).Info().Str(logging.KeyResourceName, name).Str(logging.KeyStep, stepID).Msg("repair decided from an earlier Application not carried out")
		} else {
			logging.From(ctx).Warn().Str(logging.KeyResourceName, name).Str(logging.KeyStep, stepID).Msg("outdated command not carried out")
		}
		return applyResult(cmd, bus.OutcomeOutdated, "", why, nil), nil
	case applyDeleting:
		return nil, dispatch.NotYet(DeletionPollInterval, "Application %s/%s is being deleted", live.Namespace, name)
	case applyBlocked:
		return applyResult(cmd, bus.OutcomeBlocked, bus.ResultReasonFinalizerPresent, fmt.Sprintf(
			"Application %s/%s carries the finalizer %s %s: deleting it would delete the release's resources, so it is not written; remove the finalizer (kubectl -n %s patch application %s --type json -p '[{\"op\":\"remove\",\"path\":\"/metadata/finalizers\"}]') or remove the component through the plan",
			live.Namespace, name, v1alpha1.ArgoResourcesFinalizer, why, live.Namespace, name), nil), nil
	}
	return w.writeApplication(ctx, cmd, desired, live, token, gate)
}

// applyAction is what applyOnce does with the Application it read (decideApply).
type applyAction int

const (
	// applyWrite writes the plan's Application (writeApplication).
	applyWrite applyAction = iota
	// applyOutdated carries nothing out: a later step or repair wrote the release (why).
	applyOutdated
	// applyForeign leaves alone an Application that is not the runtime's (why).
	applyForeign
	// applyBlocked leaves alone an Application carrying the resources finalizer that no Remove
	// in progress armed (why: armed's answer).
	applyBlocked
	// applyDeleting waits while Argo CD deletes the Application (NotYet).
	applyDeleting
	// applyStale decides again on a fresh read: a decision made on the cache writes nothing.
	applyStale
	// applyAskEnded asks whether the command's rollout has ended (rolloutEnded) into
	// applyFacts.ended, and decides again.
	applyAskEnded
	// applyAskArmed asks whether a Remove in progress armed the finalizer (armed) into
	// applyFacts.unarmed, and decides again.
	applyAskArmed
)

// applyFacts is what decideApply decides from: the command, the Application read, and the
// answers to the questions decideApply asked.
type applyFacts struct {
	// live is the Application read (nil: there is none); fromCache, whether the cache served it.
	live      *argoapp.Application
	fromCache bool
	cmd       *bus.ApplyCommand
	// token is the command's step token (v1alpha1.StepToken).
	token string
	// ended is rolloutEnded's answer (why the command is outdated, or ""); nil until asked.
	ended *string
	// unarmed is armed's answer (why the finalizer forbids the write, or ""); nil until asked.
	unarmed *string
}

// decideApply decides what an Apply does with the Application read, and says why (the result's
// message) where it refuses. In this order: a repair decided from another Application than the
// one there is outdated (changedSince); any refusal decided on the cache is decided again on a
// fresh read; an Application not the runtime's is foreign (ownerEvidence); a command a later
// write of the release overtook is outdated (outdatedBy; when the tokens cannot be ordered,
// whether its rollout ended); one being deleted is waited for; one carrying the resources
// finalizer is written only while a Remove of it is in progress.
func decideApply(f applyFacts) (applyAction, string) {
	live := f.live
	if live == nil {
		if why := changedSince(nil, f.cmd.Basis, f.token); why != "" {
			return applyOutdated, why
		}
		return applyWrite, ""
	}
	outdated, ask := outdatedBy(live.Annotations, f.cmd.Step)
	if outdated == "" {
		outdated = changedSince(live, f.cmd.Basis, f.token)
	}
	foreign := ownerEvidence(live, f.cmd.RuntimeUID)
	deleting, finalizer := live.DeletionTimestamp != nil, hasResourcesFinalizer(live)
	if f.fromCache && (foreign != "" || deleting || finalizer || outdated != "") {
		return applyStale, ""
	}
	if foreign != "" {
		return applyForeign, foreign
	}
	if ask {
		if f.ended == nil {
			return applyAskEnded, ""
		}
		if outdated = *f.ended; outdated != "" && f.fromCache {
			return applyStale, ""
		}
	}
	if outdated != "" {
		return applyOutdated, outdated
	}
	if deleting {
		return applyDeleting, ""
	}
	if finalizer {
		if f.unarmed == nil {
			return applyAskArmed, ""
		}
		if *f.unarmed != "" {
			return applyBlocked, *f.unarmed
		}
	}
	return applyWrite, ""
}

// writeApplication writes the plan's Application as applyOnce decided (live is the one read,
// nil when there is none), asks Argo CD for the comparison that proves the step, and starts
// a readiness release's sync; it returns the result to publish.
func (w *Writer) writeApplication(ctx context.Context, cmd *bus.ApplyCommand, desired, live *argoapp.Application, token string, gate bool) (*bus.ApplyResult, error) {
	name := desired.Name
	stepWrite := stepWriteFor(live, desired)
	var app *argoapp.Application
	var err error
	if live == nil {
		// Create is create: an Application someone made under the name since the read makes
		// this fail (AlreadyExists), and the name is read again and its ownership checked,
		// where an apply would have taken that Application over.
		if app, err = w.create(ctx, desired); err != nil {
			return w.writeFailed(cmd, "create", name, err)
		}
	} else {
		// Held to the UID and resourceVersion read: the ownership checked above is the
		// object's written, and a deleted one is not created again by the apply (the read is
		// then made again, and the name created).
		body, merr := manifest(desired, stepWrite, guardOf(live))
		if merr != nil {
			return nil, dispatch.Terminal(merr)
		}
		if app, err = w.apps.Patch(ctx, name, types.ApplyPatchType, body, applyOptions(v1alpha1.FieldManager)); err != nil {
			return w.writeFailed(cmd, "apply", name, err)
		}
		// What another manager added and the apply does not state (an apply removes only
		// fields its manager owned) goes too, so the Application is exactly the plan's.
		patch, unstated, perr := unstatedPatch(app, desired, stepWrite, guardOf(app))
		if perr != nil {
			return nil, dispatch.Terminal(perr)
		}
		if unstated {
			if app, err = w.apps.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: v1alpha1.FieldManager}); err != nil {
				return w.writeFailed(cmd, "remove unstated fields of", name, err)
			}
		}
	}
	if _, marked := app.Annotations[v1alpha1.AnnotationDeleteRollout]; marked {
		// A Remove of this release was prepared and abandoned: take back its annotation and
		// finalizer, so deleting the Application can no longer delete the release's resources.
		body, err := releaseManifest(name, desired.Namespace, uidOnly(app))
		if err != nil {
			return nil, dispatch.Terminal(err)
		}
		if app, err = w.apps.Patch(ctx, name, types.ApplyPatchType, body, applyOptions(RemoveFieldManager)); err != nil {
			return w.writeFailed(cmd, "release removal fields of", name, err)
		}
	}
	if _, marked := app.Annotations[v1alpha1.AnnotationDeleteRollout]; marked {
		// Set by someone else (a field the removal manager does not own): no Remove step backs
		// it, so it is drift, and it goes.
		patch, err := unmarkPatch(guardOf(app))
		if err != nil {
			return nil, dispatch.Terminal(err)
		}
		if app, err = w.apps.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: v1alpha1.FieldManager}); err != nil {
			return w.writeFailed(cmd, "remove the delete-rollout annotation of", name, err)
		}
	}
	// The refresh handshake, after every write of the step, changed or not: Argo CD compares
	// the Application as it is once the request is made and removes the request when it saves
	// that comparison, so "refresh-for is this step and no request is left" proves a comparison
	// after the step began. Nothing else does: a status whose comparedTo already equals the
	// written spec may be a comparison from before the write (a hand edit Argo CD compared
	// first, or the Application this one replaced: Argo CD saves status by name).
	outcome := bus.OutcomeWritten
	if stepWrite == v1alpha1.StepWriteUnchanged {
		outcome = bus.OutcomeRefreshed
	}
	if app.Annotations[v1alpha1.AnnotationRefreshFor] != token {
		patch, err := refreshPatch(token, uidOnly(app))
		if err != nil {
			return nil, dispatch.Terminal(err)
		}
		if app, err = w.apps.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: v1alpha1.FieldManager}); err != nil {
			return w.writeFailed(cmd, "request refresh of", name, err)
		}
	}
	// Under suspendEngine the engine is asked to hold still: no explicit sync either. (One left
	// running would also hold the resume write back, NotYet, past a later Remove of the release.)
	if gate && !cmd.SuspendEngine {
		if app, err = w.startSync(ctx, app, desired, token); err != nil {
			return nil, err
		}
		outcome = bus.OutcomeSyncStarted
	}
	return applyResult(cmd, outcome, "", outcomeMessage(outcome, stepWrite), app), nil
}

// create creates the built Application (step-write changed) and hands its fields to the
// operator's server-side apply: a create records them as the field manager's Update, and a
// field that entry still held would stay when a later apply stops stating it. The handover
// rewrites that one entry's operation to Apply, held to the new object's UID and
// resourceVersion; a conflict (Argo CD wrote in between) reads it again. If the handover
// cannot be made, the object is still the one built, and the entry co-owns fields every apply
// states, so the error is only logged.
func (w *Writer) create(ctx context.Context, desired *argoapp.Application) (*argoapp.Application, error) {
	body, err := manifest(desired, v1alpha1.StepWriteChanged, guard{})
	if err != nil {
		return nil, dispatch.Terminal(err)
	}
	app, err := w.apps.Create(ctx, body, metav1.CreateOptions{FieldManager: v1alpha1.FieldManager})
	if err != nil {
		return nil, err
	}
	uid := app.UID
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fields, ok := appliedOwnership(app.ManagedFields)
		if !ok {
			return nil
		}
		patch, err := json.Marshal(map[string]any{"metadata": guardMeta(guardOf(app), map[string]any{"managedFields": fields})})
		if err != nil {
			return err
		}
		out, err := w.apps.Patch(ctx, app.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: v1alpha1.FieldManager})
		if err == nil {
			app = out
			return nil
		}
		if !apierrors.IsConflict(err) {
			return err
		}
		cur, gerr := w.get(ctx, app.Name)
		if gerr != nil || cur == nil || cur.UID != uid {
			return fmt.Errorf("re-read after conflict: %w", errors.Join(gerr, errors.New("application gone or replaced")))
		}
		app = cur
		return err
	})
	if err != nil {
		logging.From(ctx).Warn().Err(err).Str(logging.KeyResourceName, app.Name).Msg("created application's fields not handed to the operator's apply")
	}
	return app, nil
}

// appliedOwnership returns managedFields with the operator's Update entry (the one a create
// records) turned into an Apply entry, and whether there was one to turn.
func appliedOwnership(entries []metav1.ManagedFieldsEntry) ([]metav1.ManagedFieldsEntry, bool) {
	out := slices.Clone(entries)
	for i := range out {
		if out[i].Manager == v1alpha1.FieldManager && out[i].Operation == metav1.ManagedFieldsOperationUpdate && out[i].Subresource == "" {
			out[i].Operation = metav1.ManagedFieldsOperationApply
			return out, true
		}
	}
	return nil, false
}

// armed says why an Application carrying the resources finalizer may not be written by an
// Apply: it has no delete-rollout marker, or the marker's rollout is not removing the release
// now (set by hand, or left by a Remove whose rollout ended). "" when a Remove of the release is
// in progress: its marker and finalizer are then taken back after the write. The rollout is
// read from the API server (the admission webhook decides the same way).
func (w *Writer) armed(ctx context.Context, live *argoapp.Application) (string, error) {
	marker := live.Annotations[v1alpha1.AnnotationDeleteRollout]
	if marker == "" {
		return "without the annotation " + v1alpha1.AnnotationDeleteRollout, nil
	}
	removing, err := w.rollouts.RemoveInProgress(ctx, marker, live.Name)
	if err != nil {
		return "", fmt.Errorf("read rollout %s, named by the %s annotation of application %s/%s: %w", marker, v1alpha1.AnnotationDeleteRollout, live.Namespace, live.Name, err)
	}
	if removing {
		return "", nil
	}
	return fmt.Sprintf("and the annotation %s=%s, but rollout %s is not removing %s (set by hand, or its rollout ended)", v1alpha1.AnnotationDeleteRollout, marker, marker, live.Name), nil
}

// startSync starts the explicit sync of a readiness release for the step token (see
// v1alpha1.StepToken), unless it was already started for this step of this rollout. Another operation set or running is waited for (NotYet).
func (w *Writer) startSync(ctx context.Context, app, desired *argoapp.Application, token string) (*argoapp.Application, error) {
	if op := app.Operation; op != nil {
		if appspec.HasStepInfo(op.Info, token) {
			return app, nil
		}
		return nil, dispatch.NotYet(OperationBusyRetry, "Application %s/%s has an operation set (initiated by %s)", app.Namespace, app.Name, op.InitiatedBy.Describe())
	}
	if st := app.Status.OperationState; st != nil {
		if appspec.HasStepInfo(st.Operation.Info, token) {
			return app, nil
		}
		if !st.Phase.Completed() {
			return nil, dispatch.NotYet(OperationBusyRetry, "Application %s/%s has an operation %s (initiated by %s)", app.Namespace, app.Name, st.Phase, st.Operation.InitiatedBy.Describe())
		}
	}
	patch, err := syncPatch(guardOf(app), appspec.SyncOperation(desired, token))
	if err != nil {
		return nil, dispatch.Terminal(err)
	}
	out, err := w.apps.Patch(ctx, app.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: v1alpha1.FieldManager})
	if err != nil {
		if apierrors.IsConflict(err) {
			return nil, err // read again: Argo CD may have started an operation meanwhile
		}
		return nil, fmt.Errorf("start sync of application %s/%s: %w", app.Namespace, app.Name, err)
	}
	logging.From(ctx).Debug().Str(logging.KeyResourceName, app.Name).Msg("start sync operation")
	return out, nil
}

// Remove runs the Remove sequence and returns the result to publish: Removed once the
// Application is gone, NotYet while Argo CD deletes the release's resources.
func (w *Writer) Remove(ctx context.Context, cmd *bus.RemoveCommand) (*bus.ApplyResult, error) {
	if err := cmd.Validate(); err != nil {
		return removeResult(cmd, bus.OutcomeFailed, bus.ResultReasonInvalidCommand, err.Error(), nil), nil
	}
	var res *bus.ApplyResult
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		res, err = w.removeOnce(ctx, cmd)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (w *Writer) removeOnce(ctx context.Context, cmd *bus.RemoveCommand) (*bus.ApplyResult, error) {
	name, ns := cmd.Release, w.settings.EngineNamespace
	live, err := w.get(ctx, name)
	if err != nil {
		return nil, err
	}
	if live == nil {
		return removeResult(cmd, bus.OutcomeRemoved, "", fmt.Sprintf("Application %s/%s is gone", ns, name), nil), nil
	}
	if why := ownerEvidence(live, cmd.RuntimeUID); why != "" {
		return removeResult(cmd, bus.OutcomeForeign, v1alpha1.ReasonForeignObject, w.foreignMessage(live, why), nil), nil
	}
	outdated, ask := outdatedBy(live.Annotations, cmd.Step)
	if ask {
		if outdated, err = w.rolloutEnded(ctx, cmd.Step, live.Annotations[v1alpha1.AnnotationStep]); err != nil {
			return nil, err
		}
	}
	if outdated != "" {
		logging.From(ctx).Warn().Str(logging.KeyResourceName, name).Str(logging.KeyStep, cmd.Step.ID).Msg("outdated command not carried out")
		return removeResult(cmd, bus.OutcomeOutdated, "", outdated, nil), nil
	}
	if live.DeletionTimestamp != nil {
		return nil, dispatch.NotYet(DeletionPollInterval, "Argo CD is deleting the resources of Application %s/%s", ns, name)
	}
	if !hasResourcesFinalizer(live) || live.Annotations[v1alpha1.AnnotationDeleteRollout] != cmd.Step.Rollout {
		body, err := removeManifest(name, ns, cmd.Step.Rollout, guardOf(live))
		if err != nil {
			return nil, dispatch.Terminal(err)
		}
		if _, err := w.apps.Patch(ctx, name, types.ApplyPatchType, body, applyOptions(RemoveFieldManager)); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) || isUIDMismatch(err) {
				return nil, conflictAgain(err) // changed, gone or replaced since the read: decide again
			}
			return nil, fmt.Errorf("mark application %s/%s for removal: %w", ns, name, err)
		}
	}
	// The delete is held to the UID of the Application whose ownership was just checked, so a
	// namesake created since the read is read and checked again, never deleted unseen. (The
	// command names no UID: the planner never reads Applications; an owned Application under the
	// name, even one a repair recreated, is the one the Remove step was approved for, unless a
	// later rollout wrote it: outdatedBy above.)
	uid := live.UID
	err = w.apps.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case apierrors.IsNotFound(err):
		return removeResult(cmd, bus.OutcomeRemoved, "", fmt.Sprintf("Application %s/%s is gone", ns, name), nil), nil
	case apierrors.IsConflict(err):
		// The UID precondition failed: a namesake was created since the read. Read it again,
		// so its ownership is checked before anything else happens to it.
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("delete application %s/%s: %w", ns, name, err)
	}
	logging.From(ctx).Info().Str(logging.KeyResourceName, name).Str("uid", string(uid)).Msg("delete application")
	return nil, dispatch.NotYet(DeletionPollInterval, "Argo CD is deleting the resources of Application %s/%s", ns, name)
}

// isUIDMismatch reports whether a write held to a UID (metadata.uid in its body) met another
// object under the name: the API server rejects the change of an immutable field.
func isUIDMismatch(err error) bool {
	if !apierrors.IsInvalid(err) {
		return false
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().Details == nil {
		return false
	}
	for _, c := range st.Status().Details.Causes {
		if c.Field == "metadata.uid" {
			return true
		}
	}
	return false
}

// conflictAgain turns a not-found, an AlreadyExists or a UID mismatch into a conflict, so
// RetryOnConflict reads again.
func conflictAgain(err error) error {
	if apierrors.IsConflict(err) {
		return err
	}
	return apierrors.NewConflict(argoapp.ApplicationsResource, "", err)
}

// get returns the live Application, or nil when there is none.
func (w *Writer) get(ctx context.Context, name string) (*argoapp.Application, error) {
	app, err := w.apps.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get application %s/%s: %w", w.settings.EngineNamespace, name, err)
	}
	return app, nil
}

// writeFailed classifies a failed write: a conflict (the object changed since it was read), a
// not-found or a UID precondition that failed (it was deleted, or replaced, since) or an
// AlreadyExists (a create met an object made since the read) is decided again by the caller, an invalid object is the
// command's final answer, anything else is retried with backoff.
func (w *Writer) writeFailed(cmd *bus.ApplyCommand, verb, name string, err error) (*bus.ApplyResult, error) {
	switch {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err) || isUIDMismatch(err):
		return nil, conflictAgain(err)
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return applyResult(cmd, bus.OutcomeFailed, bus.ResultReasonApplicationRejected,
			fmt.Sprintf("the API server rejected Application %s/%s: %v", w.settings.EngineNamespace, name, err), nil), nil
	}
	return nil, fmt.Errorf("%s application %s/%s: %w", verb, w.settings.EngineNamespace, name, err)
}

func (w *Writer) foreignMessage(app *argoapp.Application, why string) string {
	return fmt.Sprintf("Application %s/%s is not owned by this runtime and is left alone: %s; rename the other Application or delete it",
		app.Namespace, app.Name, why)
}

// stepWriteFor decides the step-write annotation: changed when the Application is new or its
// source (values included), destination or ignoreDifferences differ from the desired ones. A
// redelivery of the same step keeps what the first delivery decided, since its write already
// made the spec equal; the same step ID of a namesake rollout (another rollout UID) is another
// step, and decides again.
func stepWriteFor(live, desired *argoapp.Application) string {
	if live == nil {
		return v1alpha1.StepWriteChanged
	}
	if v1alpha1.AnnotatedStepToken(live.Annotations) == v1alpha1.AnnotatedStepToken(desired.Annotations) {
		switch prev := live.Annotations[v1alpha1.AnnotationStepWrite]; prev {
		case v1alpha1.StepWriteChanged, v1alpha1.StepWriteUnchanged:
			return prev
		}
	}
	if !appspec.EqualSource(live.Spec.Source, desired.Spec.Source) ||
		!appspec.EqualDestination(live.Spec.Destination, desired.Spec.Destination) ||
		!equality.Semantic.DeepEqual(live.Spec.IgnoreDifferences, desired.Spec.IgnoreDifferences) {
		return v1alpha1.StepWriteChanged
	}
	return v1alpha1.StepWriteUnchanged
}

func hasResourcesFinalizer(app *argoapp.Application) bool {
	return slices.Contains(app.Finalizers, v1alpha1.ArgoResourcesFinalizer)
}

func applyOptions(manager string) metav1.PatchOptions {
	force := true
	return metav1.PatchOptions{FieldManager: manager, Force: &force}
}

func outcomeMessage(outcome, stepWrite string) string {
	switch outcome {
	case bus.OutcomeWritten:
		return "the Application's spec was written; Argo CD syncs it"
	case bus.OutcomeRefreshed:
		return "the Application's spec was already as planned; a refresh was requested"
	case bus.OutcomeSyncStarted:
		if stepWrite == v1alpha1.StepWriteChanged {
			return "the Application's spec was written and its sync operation started"
		}
		return "the Application's spec was already as planned; its sync operation started"
	}
	return ""
}

func applyResult(cmd *bus.ApplyCommand, outcome, reason, message string, app *argoapp.Application) *bus.ApplyResult {
	return result(cmd.ID, cmd.Runtime, cmd.Release, cmd.Step, cmd.Action, outcome, reason, message, app)
}

func removeResult(cmd *bus.RemoveCommand, outcome, reason, message string, app *argoapp.Application) *bus.ApplyResult {
	return result(cmd.ID, cmd.Runtime, cmd.Release, cmd.Step, v1alpha1.ActionRemove, outcome, reason, message, app)
}

func result(id, runtime, release string, step bus.StepRef, action v1alpha1.StepAction, outcome, reason, message string, app *argoapp.Application) *bus.ApplyResult {
	r := &bus.ApplyResult{CommandID: id, Runtime: runtime, Release: release, Step: step, Action: action,
		Outcome: outcome, Reason: reason, Message: message}
	if app != nil {
		r.UID, r.ResourceVersion = string(app.UID), app.ResourceVersion
	}
	return r
}
