// Package engine tells whether Argo CD is usable: its CRDs (applications.argoproj.io,
// appprojects.argoproj.io) served and the operator's AppProject present. A Monitor polls, with
// backoff while Argo CD is missing, publishes bus.EngineStatus on every change and periodically
// (so a restarted planner learns the state), and signals once the CRDs are there so the
// Application watch can start without a restart.
package engine

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/clock"

	"github.com/aicr-run/aicr-operator/servicekit/logging"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// Defaults of the Monitor.
const (
	// DefaultRepublish is how often the state is published when nothing changes.
	DefaultRepublish = 5 * time.Minute
	// DefaultPollMin and DefaultPollMax bound the backoff while Argo CD is not usable.
	DefaultPollMin = time.Second
	DefaultPollMax = 30 * time.Second
	// DefaultPollAvailable is the poll period once Argo CD is usable.
	DefaultPollAvailable = 30 * time.Second

	groupVersion = "argoproj.io/v1alpha1"
)

// Status is the outcome of one check.
type Status struct {
	// Available is true when the CRDs and the AppProject exist.
	Available bool
	// CRDs is true when both CRDs are served (the Application watch can run).
	CRDs bool
	// Reason is an EngineAvailable reason; Message explains it.
	Reason  string
	Message string
}

// ProjectGetter reads an AppProject of the engine namespace.
type ProjectGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*argoapp.AppProject, error)
}

// Checker looks at the cluster once.
type Checker struct {
	// Discovery finds the CRDs.
	Discovery discovery.DiscoveryInterface
	// Projects reads the AppProject; *argoapp.AppProjects of the engine namespace satisfies it.
	Projects ProjectGetter
	// Namespace is --engine-namespace; Project is --engine-project.
	Namespace string
	Project   string
}

// Check reports the engine's state. An error means the check itself could not be made (the
// API server unreachable): the state is unknown, not missing.
func (c *Checker) Check(ctx context.Context) (Status, error) {
	list, err := c.Discovery.ServerResourcesForGroupVersion(groupVersion)
	if err != nil && !apierrors.IsNotFound(err) {
		return Status{}, fmt.Errorf("discover %s: %w", groupVersion, err)
	}
	served := map[string]bool{}
	if list != nil {
		for _, r := range list.APIResources {
			served[r.Name] = true
		}
	}
	var missing []string
	for _, crd := range []string{"applications", "appprojects"} {
		if !served[crd] {
			missing = append(missing, crd+".argoproj.io")
		}
	}
	if len(missing) > 0 {
		return Status{Reason: v1alpha1.ReasonEngineMissing, Message: fmt.Sprintf("Argo CD's CRDs are not installed (missing %v): install Argo CD v3.4.2 in namespace %s; the operator starts watching Applications once they appear", missing, c.Namespace)}, nil
	}
	_, err = c.Projects.Get(ctx, c.Project, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return Status{CRDs: true, Reason: v1alpha1.ReasonProjectMissing, Message: fmt.Sprintf("AppProject %s/%s does not exist: every owned Application references it; helm upgrade of the operator chart recreates it (engine.project)", c.Namespace, c.Project)}, nil
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return Status{CRDs: true, Reason: v1alpha1.ReasonUnauthorized, Message: fmt.Sprintf("reading AppProject %s/%s is not allowed: grant get on appprojects.argoproj.io in %s to the readiness service account", c.Namespace, c.Project, c.Namespace)}, nil
	case err != nil:
		return Status{}, fmt.Errorf("get appproject %s/%s: %w", c.Namespace, c.Project, err)
	}
	return Status{Available: true, CRDs: true, Reason: v1alpha1.ReasonEngineAvailable, Message: fmt.Sprintf("Argo CD's CRDs are installed and AppProject %s/%s exists", c.Namespace, c.Project)}, nil
}

// Publisher sends a message; *bus.Publisher implements it.
type Publisher interface {
	Publish(ctx context.Context, subject, id string, m bus.Envelope) error
}

// Monitor runs the Checker in a loop.
type Monitor struct {
	Check     func(ctx context.Context) (Status, error)
	Publisher Publisher
	Clock     clock.WithTicker
	// Republish, PollMin, PollMax and PollAvailable default to the Default* constants.
	Republish, PollMin, PollMax, PollAvailable time.Duration

	crds chan struct{}
}

// CRDs is closed once both CRDs have been seen: the Application watch may start.
func (m *Monitor) CRDs() <-chan struct{} {
	m.init()
	return m.crds
}

func (m *Monitor) init() {
	if m.crds == nil {
		m.crds = make(chan struct{})
	}
	if m.Clock == nil {
		m.Clock = clock.RealClock{}
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&m.Republish, DefaultRepublish}, {&m.PollMin, DefaultPollMin}, {&m.PollMax, DefaultPollMax}, {&m.PollAvailable, DefaultPollAvailable}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
}

// Run checks until ctx ends. It returns nil on a clean stop.
func (m *Monitor) Run(ctx context.Context) error {
	m.init()
	log := logging.From(ctx)
	var last *Status
	var lastSent time.Time
	var pending *bus.EngineStatus // a publish that failed, retried with the same ID
	pendingID := ""
	crdsSeen := false
	var delay, backoff time.Duration
	for {
		st, err := m.Check(ctx)
		now := m.Clock.Now()
		switch {
		case err != nil:
			log.Warn().Err(err).Msg("check argo cd")
		default:
			if st.CRDs && !crdsSeen {
				crdsSeen = true
				close(m.crds)
			}
			changed := last == nil || last.Available != st.Available || last.Reason != st.Reason
			if changed {
				log.Info().Bool("available", st.Available).Str(logging.KeyReason, st.Reason).Msg("argo cd state")
			}
			if changed || now.Sub(lastSent) >= m.Republish {
				pending = &bus.EngineStatus{Available: st.Available, Reason: st.Reason, Message: st.Message}
				// One ID per intended publish: a retry after a failed publish is the same message.
				pendingID = fmt.Sprintf("engine/%s/%d", st.Reason, now.Unix())
			}
			s := st
			last = &s
		}
		if pending != nil {
			if err := m.Publisher.Publish(ctx, bus.SubjectEngine, pendingID, pending); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				log.Warn().Err(err).Msg("publish engine status")
			} else {
				pending = nil
				lastSent = now
			}
		}
		if err == nil && last != nil && last.Available && pending == nil {
			delay, backoff = m.PollAvailable, 0
		} else {
			// Missing, unknown or unpublished: look again soon, backing off to PollMax.
			backoff = min(max(2*backoff, m.PollMin), m.PollMax)
			delay = backoff
		}
		select {
		case <-ctx.Done():
			return nil
		case <-m.Clock.After(delay):
		}
	}
}
