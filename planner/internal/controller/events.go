package controller

import (
	"cmp"
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/servicekit/logging"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

const (
	corev1Normal  = corev1.EventTypeNormal
	corev1Warning = corev1.EventTypeWarning
	// eventTimeout bounds one Event write: Events are news, never worth blocking a decision.
	eventTimeout = 5 * time.Second
)

// EventNamespace is where Events about a ClusterRuntime go. The API server accepts an Event
// about a cluster-scoped object only in "default" (or kube-system), and that is where
// `kubectl describe clusterruntime` finds them; the chart grants the planner create on Events
// there (see docs/planner.md).
const EventNamespace = "default"

// event records a core/v1 Event on the ClusterRuntime. A failure is logged and otherwise
// ignored: Events are news, never a reason to stop a decision.
func (c *Controller) event(ctx context.Context, rt *v1alpha1.ClusterRuntime, typ, reason, msg string) {
	if len(msg) > 1024 {
		msg = msg[:1021] + "..."
	}
	now := metav1.NewTime(c.cfg.Clock.Now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: rt.Name + ".", Namespace: EventNamespace},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "ClusterRuntime",
			Name: rt.Name, UID: rt.UID, ResourceVersion: rt.ResourceVersion,
		},
		Reason: reason, Message: msg, Type: typ,
		Source:         corev1.EventSource{Component: cmp.Or(c.cfg.Name, v1alpha1.BinaryPlanner)},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: "aicr.run/" + cmp.Or(c.cfg.Name, v1alpha1.BinaryPlanner),
		ReportingInstance:   cmp.Or(c.cfg.Name, v1alpha1.BinaryPlanner),
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), eventTimeout)
	defer cancel()
	if err := c.store.CreateEvent(ctx, ev); err != nil {
		logging.From(ctx).Warn().Err(err).Str(logging.KeyReason, reason).Msg("record event")
	}
}
