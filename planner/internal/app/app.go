// Package app is the planner's wiring: its options and Run.
package app

import (
	"context"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/aicr-run/aicr-operator/planner/internal/controller"
	"github.com/aicr-run/aicr-operator/planner/internal/ocibundle"
	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	"github.com/aicr-run/aicr-operator/servicekit/logging"
	"github.com/aicr-run/aicr-operator/servicekit/service"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
)

// Name is the binary's name: logger component, metrics namespace, NATS connection name, durable
// consumer and leader-election lock.
const Name = v1alpha1.BinaryPlanner

// DispatchWorkers is how many bus messages the planner handles at once; one runtime's messages
// are still handled one at a time (the controller locks per runtime).
const DispatchWorkers = 4

// Kubernetes client rate limits of the planner. It handles one runtime's messages one at a time,
// so its requests are sequential per runtime; the limits are set above what that asks for, so
// that the client's rate limiter, not the API server, never sets the pace of a rollout
// (docs/performance.md). The API server's priority and fairness protects it beyond that.
const (
	DefaultKubeQPS   = 1000
	DefaultKubeBurst = 2000
)

// Options are the planner's flags.
type Options struct {
	service.Options
	// OperatorIdentities is --operator-identities: user names of the operator itself; an
	// approval set by one of them is ignored.
	OperatorIdentities string
	// Workers is --workers: runtimes reconciled at once.
	Workers int
	// RepoCredsSecret is --repo-creds-secret: the repo-creds Secret in --engine-namespace whose
	// credentials spec.bundle.oci bundles are pulled with.
	RepoCredsSecret string
	// EngineProject is --engine-project and RegistryRepository --registry-repository: what an
	// owned Application must say (appspec.Settings), for the drift checks.
	EngineProject      string
	RegistryRepository string
	// DriftResync is --drift-resync: how often every release is checked for drift anyway.
	DriftResync time.Duration
	// RegistryCAFile is --registry-ca-file: PEM certificate authorities a registry's
	// certificate is verified against besides the system's (a mounted private CA bundle).
	RegistryCAFile string
}

// MaxDriftResync bounds --drift-resync: past it an edit whose every hint was lost stands too
// long for the promise that the operator forces its fields back.
const MaxDriftResync = 10 * time.Minute

// BindFlags registers the flags with their defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	o.Options.BindFlags(fs)
	service.SetDefault(fs, "kube-qps", strconv.Itoa(DefaultKubeQPS))
	service.SetDefault(fs, "kube-burst", strconv.Itoa(DefaultKubeBurst))
	fs.StringVar(&o.OperatorIdentities, "operator-identities", "",
		"comma-separated user names of the operator itself, whose approvals are ignored (default: aicr-operator and the service accounts aicr-operator-<binary> of the five binaries in --namespace, as the chart names them)")
	fs.IntVar(&o.Workers, "workers", 2, "runtimes reconciled at once")
	fs.StringVar(&o.RepoCredsSecret, "repo-creds-secret", v1alpha1.DefaultRepoCredsSecret,
		"the repo-creds Secret in --engine-namespace (registry.auth.repoCredsSecret): the credentials spec.bundle.oci bundles are pulled with, read at each pull")
	fs.StringVar(&o.EngineProject, "engine-project", appspec.DefaultProject, "AppProject of the owned Applications (engine.project)")
	fs.StringVar(&o.RegistryRepository, "registry-repository", "",
		"registry prefix of the chart paths, such as registry.example.com/aicr (registry.repository; required: drift is reconciled by comparing each owned Application with what its plan renders)")
	fs.StringVar(&o.RegistryCAFile, "registry-ca-file", "",
		"a PEM file of certificate authorities the bundle registry's certificate is verified against besides the system's (a private CA bundle mounted with extraVolumes)")
	fs.DurationVar(&o.DriftResync, "drift-resync", controller.DefaultDriftResync,
		"how often every owned Application is checked for drift even when nothing reported any (1s to 10m): the longest an edit stands when every report of it was lost")
}

// Validate checks the flags.
func (o *Options) Validate() error {
	var errs []string
	if err := o.Options.Validate(); err != nil {
		errs = append(errs, strings.TrimPrefix(err.Error(), "invalid flags: "))
	}
	if o.Workers < 1 || o.Workers > 64 {
		errs = append(errs, fmt.Sprintf("--workers %d: use 1 to 64", o.Workers))
	}
	if o.DriftResync < time.Second || o.DriftResync > MaxDriftResync {
		errs = append(errs, fmt.Sprintf("--drift-resync %s: use 1s to %s", o.DriftResync, MaxDriftResync))
	}
	if o.RegistryRepository == "" {
		errs = append(errs, "--registry-repository is required: the registry path holding charts/ and wrappers/, such as registry.example.com/aicr (the planner renders each Application's plan from it to find drift)")
	} else if err := o.settings().Validate(); err != nil {
		errs = append(errs, "--registry-repository / --engine-project: "+err.Error())
	}
	if msgs := validation.IsDNS1123Subdomain(o.RepoCredsSecret); len(msgs) > 0 {
		errs = append(errs, fmt.Sprintf("--repo-creds-secret %q: a Secret name is required (%s)", o.RepoCredsSecret, strings.Join(msgs, "; ")))
	}
	if _, err := service.SplitIdentities(o.OperatorIdentities); err != nil {
		errs = append(errs, err.Error())
	}
	if _, err := o.registryRootCAs(); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid flags: %s", strings.Join(errs, "; "))
	}
	return nil
}

// registryRootCAs are the system's certificate authorities and those of --registry-ca-file;
// nil (the system's) without the flag.
func (o *Options) registryRootCAs() (*x509.CertPool, error) {
	if o.RegistryCAFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(o.RegistryCAFile)
	if err != nil {
		return nil, fmt.Errorf("--registry-ca-file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--registry-ca-file %s: no PEM certificate in it", o.RegistryCAFile)
	}
	return pool, nil
}

// settings are what an owned Application must say.
func (o *Options) settings() appspec.Settings {
	return appspec.Settings{EngineNamespace: o.EngineNamespace, Project: o.EngineProject, Repository: o.RegistryRepository}
}

// Identities returns the operator's own identities: --operator-identities, or when it names none
// aicr-operator and the chart's service accounts of the five binaries in --namespace.
func (o *Options) Identities() []string {
	if ids, err := service.SplitIdentities(o.OperatorIdentities); err == nil && len(ids) > 0 {
		return ids
	}
	return append([]string{v1alpha1.FieldManager}, v1alpha1.OperatorIdentities(o.Namespace)...)
}

// Main parses args, runs the binary and returns the exit code.
func Main(ctx context.Context, args []string, stderr io.Writer) int {
	var o Options
	return service.Main(ctx, Name, args, stderr, &o, func(ctx context.Context) error { return Run(ctx, o) })
}

// Run runs the planner until ctx ends. While it leads (or at once without --leader-elect) it
// waits for JetStream, then runs the controller and the event consumer side by side.
func Run(ctx context.Context, o Options) error {
	base, err := service.Start(Name, o.Options, true, os.Stderr)
	if err != nil {
		return err
	}
	defer base.Close()
	ctx = logging.Into(ctx, base.Log)
	clk, err := controllerClock()
	if err != nil {
		return err
	}
	kube, err := controller.NewKube(base.Kube, base.KubeClient)
	if err != nil {
		return err
	}
	argo, err := argoapp.NewForConfig(base.Kube)
	if err != nil {
		return fmt.Errorf("create argo cd client: %w", err)
	}
	owned := labels.SelectorFromSet(labels.Set{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}).String()
	recorder, stopEvents := controller.NewRecorder(base.KubeClient, o.Identity)
	metrics := controller.NewMetrics(base.Metrics)
	defer stopEvents()
	g, gctx := errgroup.WithContext(ctx)
	if _, _, err := base.Serve(gctx, g); err != nil {
		return err
	}
	g.Go(func() error {
		return base.RunLeader(gctx, func(lctx context.Context) error {
			// The planner owns stream setup: the streams and every durable consumer, which the
			// other binaries only bind to (their NATS identities may not declare them).
			consumers, err := dispatch.WaitSetup(lctx, base.JS, o.StreamReplicas)
			if err != nil {
				if lctx.Err() != nil {
					return nil // stopped (or lost the lease) while waiting for JetStream
				}
				return err
			}
			if err := base.Bus.WatchConsumer(consumers[bus.ConsumerPlanner]); err != nil {
				return err
			}
			rootCAs, err := o.registryRootCAs()
			if err != nil {
				return err
			}
			bundles := ocibundle.New(ocibundle.Config{
				RootCAs: rootCAs,
				Secrets: func(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
					return base.KubeClient.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
				},
				SecretNamespace: o.EngineNamespace, SecretName: o.RepoCredsSecret,
			})
			ctrl := controller.New(controller.Config{
				Name: Name, Namespace: o.Namespace, EngineNamespace: o.EngineNamespace,
				Identities: o.Identities(), Workers: o.Workers, Recorder: recorder, Metrics: metrics,
				Bundles: bundles, Applications: argo.Applications(o.EngineNamespace).ListWatch(owned),
				Settings: o.settings(), DriftResync: o.DriftResync,
				Parked: dispatch.ParkedStream{JS: base.JS, Publish: base.Publisher().PublishMsg},
				Clock:  clk,
			}, kube, base.Publisher())
			ctrl.Restore(lctx, func(ctx context.Context, subject string) (*dispatch.Message, error) {
				return dispatch.Last(ctx, base.JS, bus.StreamEvents, subject)
			})
			lg, lgctx := errgroup.WithContext(lctx)
			lg.Go(func() error { return ctrl.Run(lgctx, kube, base.KubeClient) })
			lg.Go(func() error {
				d := &dispatch.Dispatcher{Consumer: consumers[bus.ConsumerPlanner], Routes: ctrl.Routes(), Workers: DispatchWorkers, Metrics: base.Bus,
					Park: base.Publisher().PublishMsg, ParkAfter: o.ParkAfter}
				return d.Run(lgctx)
			})
			return lg.Wait()
		})
	})
	base.Log.Info().Msg("started")
	err = g.Wait()
	base.Log.Info().Msg("stopped")
	return err
}
