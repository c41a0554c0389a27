// Package app is the admission webhook's wiring: its options and Run.
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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/aicr-run/aicr-operator/admission/internal/audit"
	"github.com/aicr-run/aicr-operator/admission/internal/cabundle"
	"github.com/aicr-run/aicr-operator/admission/internal/certs"
	"github.com/aicr-run/aicr-operator/admission/internal/rules"
	"github.com/aicr-run/aicr-operator/admission/internal/webhook"
	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	"github.com/aicr-run/aicr-operator/servicekit/logging"
	"github.com/aicr-run/aicr-operator/servicekit/service"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/runtimeclient"
)

// Name is the binary's name: logger component, metrics namespace and NATS connection name.
const Name = v1alpha1.BinaryAdmission

// DefaultWebhookAddr is where the webhook listens for AdmissionReviews (HTTPS only).
const DefaultWebhookAddr = ":9443"

// Options are the admission webhook's flags.
type Options struct {
	service.Options
	// WebhookAddr is --webhook-addr: the HTTPS listen address of the webhook.
	WebhookAddr string
	// TLSCertFile and TLSKeyFile are --tls-cert-file and --tls-key-file: the serving
	// certificate and key (PEM), reloaded when they change on disk.
	TLSCertFile string
	TLSKeyFile  string
	// OperatorIdentities is --operator-identities: the operator's usernames, comma-separated
	// (system:serviceaccount:<namespace>:<name>).
	OperatorIdentities string
	// WebhookConfiguration and CABundleFile are --webhook-configuration and --ca-bundle-file:
	// keep the caBundle of every webhook of that ValidatingWebhookConfiguration equal to the CA
	// in the file (the chart renders none; with cert-manager, cainjector writes it instead).
	WebhookConfiguration string
	CABundleFile         string
}

// BindFlags registers the flags with their defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	o.Options.BindFlags(fs)
	fs.StringVar(&o.WebhookAddr, "webhook-addr", DefaultWebhookAddr, "HTTPS listen address of the webhook (path "+webhook.Path+")")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", "", "serving certificate (PEM), reloaded when it changes")
	fs.StringVar(&o.TLSKeyFile, "tls-key-file", "", "serving certificate's private key (PEM), reloaded when it changes")
	fs.StringVar(&o.OperatorIdentities, "operator-identities", "", "the operator's usernames, comma-separated (system:serviceaccount:<namespace>:<name>)")
	fs.StringVar(&o.WebhookConfiguration, "webhook-configuration", "", "ValidatingWebhookConfiguration whose caBundle this webhook keeps equal to --ca-bundle-file (empty: leave it)")
	fs.StringVar(&o.CABundleFile, "ca-bundle-file", "", "the CA (PEM) the serving certificate chains to, written into --webhook-configuration")
}

// Identities returns the parsed --operator-identities (nil when it does not parse: Validate
// says why).
func (o *Options) Identities() []string {
	ids, err := service.SplitIdentities(o.OperatorIdentities)
	if err != nil {
		return nil
	}
	return ids
}

// Validate checks the flags and names the flag at fault.
func (o *Options) Validate() error {
	var errs []string
	if err := o.Options.Validate(); err != nil {
		errs = append(errs, err.Error())
	}
	if o.TLSCertFile == "" || o.TLSKeyFile == "" {
		errs = append(errs, "--tls-cert-file and --tls-key-file are required: the webhook serves HTTPS only")
	}
	if o.WebhookAddr == "" {
		errs = append(errs, "--webhook-addr is required")
	}
	if (o.WebhookConfiguration == "") != (o.CABundleFile == "") {
		errs = append(errs, "--webhook-configuration and --ca-bundle-file go together: the configuration to write the CA into, and the CA")
	}
	switch ids, err := service.SplitIdentities(o.OperatorIdentities); {
	case err != nil:
		errs = append(errs, err.Error())
	case len(ids) == 0:
		errs = append(errs, "--operator-identities is required: the usernames of the operator's service accounts, comma-separated")
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// Main parses args, runs the binary and returns the exit code.
func Main(ctx context.Context, args []string, stderr io.Writer) int {
	var o Options
	return service.Main(ctx, Name, args, stderr, &o, func(ctx context.Context) error { return Run(ctx, o) })
}

// Run runs the webhook until ctx ends.
func Run(ctx context.Context, o Options) error {
	base, err := service.Start(Name, o.Options, true, os.Stderr)
	if err != nil {
		return err
	}
	defer base.Close()
	ctx = logging.Into(ctx, base.Log)

	reloader := certs.NewReloader(o.TLSCertFile, o.TLSKeyFile)
	base.AddCheck("tls", reloader.Check)
	operator, err := runtimeclient.NewForConfig(base.Kube)
	if err != nil {
		return fmt.Errorf("create rollout client: %w", err)
	}
	validator := rules.New(rules.Config{
		OperatorIdentities: o.Identities(),
		Namespace:          o.Namespace,
		EngineNamespace:    o.EngineNamespace,
		Bundles:            configMaps{base.KubeClient},
		Rollouts:           rollouts{operator.Rollouts()},
	})
	recorder := audit.NewRecorder(base.Publisher(), base.Metrics, Name)
	handler := webhook.NewHandler(validator, recorder, webhook.NewMetrics(base.Metrics, Name), base.Log)
	srv, err := webhook.Listen(o.WebhookAddr, certs.ServerConfig(reloader), handler)
	if err != nil {
		return err
	}

	g, gctx := errgroup.WithContext(ctx)
	if _, _, err := base.Serve(gctx, g); err != nil {
		return err
	}
	g.Go(func() error { return srv.Run(gctx) })
	if o.WebhookConfiguration != "" {
		inj := &cabundle.Injector{Client: base.KubeClient.AdmissionregistrationV1().ValidatingWebhookConfigurations(),
			Name: o.WebhookConfiguration, CAFile: o.CABundleFile}
		base.AddCheck("ca-bundle", inj.Check)
		g.Go(func() error { return inj.Run(gctx) })
	}
	g.Go(func() error {
		// The audit subject lives on the events stream, which the planner declares; wait for
		// it. Denials queue meanwhile.
		if err := dispatch.WaitStream(gctx, base.JS, bus.StreamEvents); err != nil {
			return nil // ctx ended
		}
		return recorder.Run(gctx)
	})
	base.Log.Info().Str("addr", srv.Addr()).Strs("operator_identities", o.Identities()).Msg("started")
	err = g.Wait()
	base.Log.Info().Msg("stopped")
	return err
}

// rollouts reads RuntimeRollouts from the API server, one GET each (a delete-rollout marker on
// an Application carrying the resources finalizer: Remove steps only).
type rollouts struct {
	rollouts *runtimeclient.Rollouts
}

func (r rollouts) GetRollout(ctx context.Context, name string) (*v1alpha1.RuntimeRollout, error) {
	ro, err := r.rollouts.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	return ro, nil
}

// configMaps reads bundle ConfigMaps with the Kubernetes client.
type configMaps struct{ cs kubernetes.Interface }

func (c configMaps) GetConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	return c.cs.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
}
