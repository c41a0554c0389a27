// Package cabundle keeps the caBundle of the webhook's ValidatingWebhookConfiguration equal to
// the CA the webhook's certificate chains to. The chart renders the configuration without one
// (it cannot know a CA the setup Job generates, and a rendered one would differ on every
// helm template), so the webhook, which mounts that CA, writes it: at start and whenever the
// file changes (a rotated Secret). With cert-manager, cainjector does this instead.
package cabundle

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	admissionregistrationv1client "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"

	"github.com/aicr-run/aicr-operator/servicekit/logging"
)

// DefaultInterval is how often Run reads the CA file again.
const DefaultInterval = time.Minute

// Injector writes one CA into every webhook of one ValidatingWebhookConfiguration.
type Injector struct {
	// Client is the ValidatingWebhookConfiguration API.
	Client admissionregistrationv1client.ValidatingWebhookConfigurationInterface
	// Name of the configuration.
	Name string
	// CAFile is the CA (PEM) the webhook's serving certificate chains to.
	CAFile string
	// Interval between checks (DefaultInterval when zero).
	Interval time.Duration

	mu      sync.Mutex
	lastErr error
	done    bool
}

// readCA reads and checks the CA file: at least one PEM certificate, nothing else.
func (i *Injector) readCA() ([]byte, error) {
	raw, err := os.ReadFile(i.CAFile)
	if err != nil {
		return nil, fmt.Errorf("read the webhook CA %s: %w", i.CAFile, err)
	}
	rest, n := bytes.TrimSpace(raw), 0
	for len(rest) > 0 {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil || b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("the webhook CA %s holds something other than PEM certificates", i.CAFile)
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return nil, fmt.Errorf("the webhook CA %s: %w", i.CAFile, err)
		}
		rest = bytes.TrimSpace(rest)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("the webhook CA %s is empty", i.CAFile)
	}
	return raw, nil
}

// Once writes the CA into every webhook whose caBundle differs, in one JSON patch guarded by
// the configuration's resourceVersion; it writes nothing when all agree. It reports whether it
// wrote.
func (i *Injector) Once(ctx context.Context) (bool, error) {
	ca, err := i.readCA()
	if err != nil {
		return false, err
	}
	cfg, err := i.Client.Get(ctx, i.Name, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("get ValidatingWebhookConfiguration %s: %w", i.Name, err)
	}
	var ops []map[string]any
	for n, w := range cfg.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, ca) {
			ops = append(ops, map[string]any{"op": "add", "path": "/webhooks/" + strconv.Itoa(n) + "/clientConfig/caBundle", "value": ca})
		}
	}
	if len(ops) == 0 {
		return false, nil
	}
	if cfg.ResourceVersion != "" { // the indexes above are this version's
		ops = append([]map[string]any{{"op": "test", "path": "/metadata/resourceVersion", "value": cfg.ResourceVersion}}, ops...)
	}
	patch, err := json.Marshal(ops) // []byte values encode as base64, as caBundle is
	if err != nil {
		return false, err
	}
	if _, err := i.Client.Patch(ctx, i.Name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: "aicr-operator-admission"}); err != nil {
		return false, fmt.Errorf("write the caBundle of ValidatingWebhookConfiguration %s: %w", i.Name, err)
	}
	return true, nil
}

// Run calls Once now and every Interval until ctx ends; a failure is logged, kept for Check and
// tried again at the next tick.
func (i *Injector) Run(ctx context.Context) error {
	interval := i.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		wrote, err := i.Once(ctx)
		i.mu.Lock()
		i.lastErr, i.done = err, i.done || err == nil
		i.mu.Unlock()
		switch {
		case err != nil && ctx.Err() == nil:
			logging.From(ctx).Warn().Err(err).Str(logging.KeyResourceName, i.Name).Msg("inject the webhook CA, retrying")
		case wrote:
			logging.From(ctx).Info().Str(logging.KeyResourceName, i.Name).Msg("webhook CA injected")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Check is a readiness check: an error until the configuration carried the CA once, and while
// the last attempt failed.
func (i *Injector) Check(context.Context) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	switch {
	case i.lastErr != nil:
		return i.lastErr
	case !i.done:
		return errors.New("the webhook CA is not injected yet")
	}
	return nil
}
