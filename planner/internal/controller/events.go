package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/aicr-run/aicr-operator/planner/internal/rollout"
	"github.com/aicr-run/aicr-operator/servicekit/logging"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

const (
	corev1Normal  = corev1.EventTypeNormal
	corev1Warning = corev1.EventTypeWarning
	// maxEventMessage bounds an Event's message: kubectl shows it on one line.
	maxEventMessage = 1024
)

// Event rate limits, per involved object and Event type (client-go's spam filter): a burst large
// enough for a rollout whose every step needs a person (blocked, then failed, or each awaiting
// approval), then one every ten seconds. client-go's default (25, then one per five minutes)
// would silence such a rollout of more than a dozen steps half-way.
const (
	EventBurst = 128
	EventQPS   = 1.0 / 10
)

// Event reasons of the planner's own, beside those of package rollout and the outcomes.
const (
	EventRolloutCreated    = "RolloutCreated"
	EventFinalizerReleased = "FinalizerReleased"
	EventHistoryPruned     = "HistoryPruned"
)

// EventComponent is the source of the planner's Events (kubectl's "From" column).
const EventComponent = "aicr-" + v1alpha1.BinaryPlanner

// NewRecorder starts client-go's event broadcaster, writing through core with its correlator:
// repeats of an Event are one Event with a count (patched), more than ten similar Events on one
// object within ten minutes are combined, and EventBurst/EventQPS limit each object. instance
// (the pod's name) tells replicas apart. Call stop when done: Events still queued are dropped.
// The controller records through references in the operator namespace (involved), not the
// objects themselves.
func NewRecorder(core kubernetes.Interface, instance string) (rec record.EventRecorder, stop func()) {
	b := record.NewBroadcaster(record.WithCorrelatorOptions(record.CorrelatorOptions{BurstSize: EventBurst, QPS: EventQPS}))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: core.CoreV1().Events("")})
	return b.NewRecorder(Scheme, corev1.EventSource{Component: EventComponent, Host: instance}), b.Shutdown
}

// discard is the recorder of a controller configured without one.
type discard struct{}

func (discard) Event(runtime.Object, string, string, string)                                      {}
func (discard) Eventf(runtime.Object, string, string, string, ...any)                             {}
func (discard) AnnotatedEventf(runtime.Object, map[string]string, string, string, string, ...any) {}

func truncate(msg string) string {
	if len(msg) > maxEventMessage {
		return msg[:maxEventMessage-3] + "..."
	}
	return msg
}

// involved is the reference an Event about a cluster-scoped object of the operator's is recorded
// on: the object's kind, name and UID, in the operator namespace. The recorder writes an Event in
// its involved object's namespace, and the API server takes an Event whose involved object names
// a namespace only in that namespace; without one it would go to namespace default, where nobody
// looks. So the Events live beside the plans and the operator's Deployments, where `kubectl aicr
// events` and `kubectl events -n <operator namespace> --for runtimerollout/NAME` read them.
func (c *Controller) involved(kind string, m metav1.Object) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		Kind: kind, APIVersion: v1alpha1.SchemeGroupVersion.String(),
		Name: m.GetName(), UID: m.GetUID(), ResourceVersion: m.GetResourceVersion(),
		Namespace: c.cfg.Namespace,
	}
}

// event records an Event on the ClusterRuntime. Recording never blocks nor fails a decision:
// Events are news.
func (c *Controller) event(_ context.Context, rt *v1alpha1.ClusterRuntime, typ, reason, msg string) {
	c.cfg.Recorder.Event(c.involved(v1alpha1.KindClusterRuntime, rt), typ, reason, truncate(msg))
}

// rolloutEvent records ev on a RuntimeRollout.
func (c *Controller) rolloutEvent(r *v1alpha1.RuntimeRollout, ev rollout.Event) {
	typ := corev1Normal
	if ev.Warning {
		typ = corev1Warning
	}
	c.cfg.Recorder.Event(c.involved(v1alpha1.KindRuntimeRollout, r), typ, ev.Reason, truncate(ev.Message))
}

// recordChanges records what a rollout status write changed: a log line for each step that
// started, succeeded, failed, blocked or awaits approval, and an Event on the rollout for those
// a person may have to act on (rollout.StepNews); at the rollout's end an Event on the rollout
// and on its runtime; and the step and rollout metrics.
func (c *Controller) recordChanges(ctx context.Context, rt *v1alpha1.ClusterRuntime, before *v1alpha1.RuntimeRolloutStatus, after *v1alpha1.RuntimeRollout) {
	c.cfg.Metrics.observeChanges(before, after)
	log := logging.From(ctx)
	for _, ch := range rollout.StepChanges(before, &after.Status) {
		ev, routine, ok := rollout.StepNews(ch, len(after.Status.Steps))
		if !ok {
			continue
		}
		line := log.Info()
		if ev.Warning {
			line = log.Warn()
		}
		// The message names the release; the context's logger may already carry a release.
		line.Str(logging.KeyStep, v1alpha1.StepID(after.Name, ch.Step.Index)).Str(logging.KeyReason, ev.Reason).Msg(ev.Message)
		if !routine {
			c.rolloutEvent(after, ev)
		}
	}
	if rollout.EndedNow(before, &after.Status) {
		ev := rollout.EndEvent(after)
		c.rolloutEvent(after, ev)
		typ := corev1Normal
		if ev.Warning {
			typ = corev1Warning
		}
		c.event(ctx, rt, typ, ev.Reason, ev.Message)
	}
}
