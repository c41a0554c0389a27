// Package app is the readiness watcher's wiring: its options and Run.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	"github.com/aicr-run/aicr-operator/servicekit/logging"
	"github.com/aicr-run/aicr-operator/servicekit/service"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"

	"github.com/aicr-run/aicr-operator/readiness/internal/engine"
	"github.com/aicr-run/aicr-operator/readiness/internal/removal"
	"github.com/aicr-run/aicr-operator/readiness/internal/watch"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// Name is the binary's name: logger component, metrics namespace, NATS connection name and
// leader-election lock.
const Name = v1alpha1.BinaryReadiness

// planCacheSize bounds the plans kept for verdicts and drift detection. It is above plan.DefaultCacheSize:
// the watched Applications may name the plans of several older rollouts (a release a rollout
// left unchanged keeps the digest it was written from).
const planCacheSize = 64

// Options are the readiness watcher's flags.
type Options struct {
	service.Options
	// EngineProject is --engine-project: the AppProject every owned Application references.
	EngineProject string
	// RegistryRepository is --registry-repository: the prefix of every chart path, needed to
	// render what the plan says each Application must be (verdicts judge against it; drift is
	// the difference).
	RegistryRepository string
	// DriftReports is --drift-reports: publish drift reports, hints that make the planner check
	// a release sooner (it finds every drift from state without them, within its resync).
	DriftReports bool

	// started, when set, receives the health address once it listens (tests).
	started func(healthAddr string)
}

// BindFlags registers the flags with their defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	o.Options.BindFlags(fs)
	fs.StringVar(&o.EngineProject, "engine-project", appspec.DefaultProject, "AppProject of the owned Applications (engine.project)")
	fs.StringVar(&o.RegistryRepository, "registry-repository", "", "registry prefix of the chart paths, such as registry.example.com/aicr (registry.repository; required: verdicts and drift compare each Application with what its plan renders)")
	fs.BoolVar(&o.DriftReports, "drift-reports", true, "publish drift reports: hints that make the planner check an edited Application at once; without them it finds every drift from state, within its --drift-resync")
}

// Validate checks the flags.
func (o *Options) Validate() error {
	var errs []string
	if err := o.Options.Validate(); err != nil {
		errs = append(errs, err.Error())
	}
	if o.EngineProject == "" {
		errs = append(errs, "--engine-project is required")
	}
	if o.RegistryRepository == "" {
		errs = append(errs, "--registry-repository is required: the registry path holding charts/ and wrappers/, such as registry.example.com/aicr (readiness renders each Application's plan from it)")
	} else if err := o.settings().Validate(); err != nil {
		errs = append(errs, "--registry-repository: "+err.Error())
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

func (o *Options) settings() appspec.Settings {
	return appspec.Settings{EngineNamespace: o.EngineNamespace, Project: o.EngineProject, Repository: o.RegistryRepository}
}

// Main parses args, runs the binary and returns the exit code.
func Main(ctx context.Context, args []string, stderr io.Writer) int {
	var o Options
	return service.Main(ctx, Name, args, stderr, &o, func(ctx context.Context) error { return Run(ctx, o) })
}

// Run runs the readiness watcher until ctx ends.
func Run(ctx context.Context, o Options) error {
	enableStreamingList()
	base, err := service.Start(Name, o.Options, true, os.Stderr)
	if err != nil {
		return err
	}
	defer base.Close()
	ctx = logging.Into(ctx, base.Log)
	argo, err := argoapp.NewForConfig(base.Kube)
	if err != nil {
		return fmt.Errorf("create argo cd client: %w", err)
	}
	metrics := watch.NewMetrics(base.Metrics)
	g, gctx := errgroup.WithContext(ctx)
	health, _, err := base.Serve(gctx, g)
	if err != nil {
		return err
	}
	if o.started != nil {
		o.started(health)
	}
	g.Go(func() error {
		return base.RunLeader(gctx, func(lctx context.Context) error {
			return lead(lctx, o, base, argo, metrics)
		})
	})
	base.Log.Info().Str("engine_namespace", o.EngineNamespace).Msg("started")
	err = g.Wait()
	base.Log.Info().Msg("stopped")
	return err
}

// lead is the work of the leader: watch Argo CD's presence, and Applications once the CRDs
// exist.
func lead(ctx context.Context, o Options, base *service.Base, argo *argoapp.Client, metrics *watch.Metrics) error {
	if err := dispatch.WaitStream(ctx, base.JS, bus.StreamEvents); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	pub := base.Publisher()
	rollouts, err := removal.NewAPIRollouts(base.Kube)
	if err != nil {
		return err
	}
	mon := &engine.Monitor{
		Check: (&engine.Checker{
			Discovery: base.KubeClient.Discovery(),
			Projects:  argo.AppProjects(o.EngineNamespace),
			Namespace: o.EngineNamespace,
			Project:   o.EngineProject,
		}).Check,
		Publisher: pub,
	}
	w := &watch.Watcher{
		Apps:      argo.Applications(o.EngineNamespace),
		Publisher: pub,
		Settings:  o.settings(),
		Plans:     plan.NewCache(plan.GetLoader(base.KubeClient.CoreV1().ConfigMaps(o.Namespace)), planCacheSize),
		Metrics:   metrics,
		Removals:  &removal.Checker{Rollouts: rollouts},

		NoDriftReports: !o.DriftReports,
	}
	g, gctx := errgroup.WithContext(ctx)
	crds := mon.CRDs()
	g.Go(func() error { return mon.Run(gctx) })
	g.Go(func() error {
		select {
		case <-gctx.Done():
			return nil
		case <-crds:
		}
		logging.From(gctx).Info().Msg("argo cd crds found; watching applications")
		return w.Run(gctx)
	})
	return g.Wait()
}
