// Package app is the applier's wiring: its options and Run.
package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/aicr-run/aicr-operator/applier/internal/appwriter"
	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	"github.com/aicr-run/aicr-operator/servicekit/logging"
	"github.com/aicr-run/aicr-operator/servicekit/service"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

// Name is the binary's name: logger component, metrics namespace, NATS connection name and
// durable consumer.
const Name = v1alpha1.BinaryApplier

// Defaults of the applier's own flags.
const (
	DefaultEngineProject = appspec.DefaultProject
	DefaultWorkers       = 8
	maxWorkers           = 256
)

// Kubernetes client rate limits of the applier. Its load on the API server is bounded by
// --workers (each worker has one request in flight), so the client's rate limit is only a
// ceiling, set above what the workers ask for so that it never paces the writes (client-go's
// usual 50 queries per second would; docs/performance.md). The API server's priority and
// fairness protects it beyond that.
const (
	DefaultKubeQPS   = 1000
	DefaultKubeBurst = 2000
)

// Options are the applier's flags.
type Options struct {
	service.Options
	// EngineProject is --engine-project: the AppProject of every Application.
	EngineProject string
	// RegistryRepository is --registry-repository: the registry path holding charts/ and
	// wrappers/.
	RegistryRepository string
	// Workers is --workers: commands handled at once by this replica.
	Workers int
}

// BindFlags registers the flags with their defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	o.Options.BindFlags(fs)
	service.SetDefault(fs, "kube-qps", strconv.Itoa(DefaultKubeQPS))
	service.SetDefault(fs, "kube-burst", strconv.Itoa(DefaultKubeBurst))
	fs.StringVar(&o.EngineProject, "engine-project", DefaultEngineProject, "the AppProject of every Application (engine.project)")
	fs.StringVar(&o.RegistryRepository, "registry-repository", "", "the OCI registry path holding charts/ and wrappers/, such as registry.example.com/aicr (registry.repository; required)")
	fs.IntVar(&o.Workers, "workers", DefaultWorkers, "commands this replica handles at once")
}

// Validate checks the flags and names the flag at fault.
func (o *Options) Validate() error {
	var errs []string
	if err := o.Options.Validate(); err != nil {
		errs = append(errs, strings.TrimPrefix(err.Error(), "invalid flags: "))
	}
	if msgs := validation.IsDNS1123Subdomain(o.EngineProject); len(msgs) > 0 {
		errs = append(errs, fmt.Sprintf("--engine-project %q: %s", o.EngineProject, strings.Join(msgs, "; ")))
	}
	switch {
	case o.RegistryRepository == "":
		errs = append(errs, "--registry-repository is required: the registry path holding charts/ and wrappers/, such as registry.example.com/aicr")
	default:
		if err := o.settings().Validate(); err != nil {
			errs = append(errs, "--"+strings.ReplaceAll(err.Error(), "registry repository", "registry-repository"))
		}
	}
	if o.Workers < 1 || o.Workers > maxWorkers {
		errs = append(errs, fmt.Sprintf("--workers %d: use 1 to %d", o.Workers, maxWorkers))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid flags: %s", strings.Join(errs, "; "))
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

// Run runs the applier until ctx ends. Replicas share the applier consumer of the commands
// work queue, so no leader election is needed.
func Run(ctx context.Context, o Options) error {
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
	apps := argo.Applications(o.EngineNamespace)
	// The read before each apply comes from an informer of the owned Applications when it has
	// the object (a GET otherwise): every write the read leads to is guarded by its
	// resourceVersion, so a stale cache costs a retry, never a wrong write.
	owned, err := appwriter.NewInformer(apps, o.EngineNamespace)
	if err != nil {
		return err
	}
	rollouts, err := appwriter.NewRollouts(base.Kube)
	if err != nil {
		return err
	}
	w, err := appwriter.New(appwriter.Config{
		Rollouts:   rollouts,
		Apps:       apps,
		Cache:      owned,
		Plans:      plan.NewCache(plan.GetLoader(base.KubeClient.CoreV1().ConfigMaps(o.Namespace)), plan.DefaultCacheSize),
		Publisher:  base.Publisher(),
		Settings:   o.settings(),
		Registerer: base.Metrics,
	})
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	if _, _, err := base.Serve(gctx, g); err != nil {
		return err
	}
	g.Go(func() error { return owned.Run(gctx) })
	g.Go(func() error {
		// The planner declares the consumer; the applier's identity may only bind to it.
		cons, err := dispatch.WaitBound(gctx, base.JS, bus.ConsumerApplier)
		if err != nil {
			if gctx.Err() != nil {
				return nil // stopped before NATS was reachable
			}
			return err
		}
		if err := base.Bus.WatchConsumer(cons); err != nil {
			return err
		}
		d := &dispatch.Dispatcher{Consumer: cons, Routes: w.Routes(), Workers: o.Workers, Metrics: base.Bus,
			Park: base.Publisher().PublishMsg, ParkAfter: o.ParkAfter}
		return d.Run(gctx)
	})
	base.Log.Info().Str("engine_namespace", o.EngineNamespace).Int("workers", o.Workers).Msg("started")
	err = g.Wait()
	base.Log.Info().Msg("stopped")
	return err
}
