package stack

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Intercept registers a validating webhook of its own for Applications in the engine namespace
// and calls fn with each admission request for the given operations before allowing it: a test
// can act inside a write of the operator's (between the API server's read of the object and its
// storage), which nothing outside the API server can otherwise time. fn runs on the API
// server's call and must return within the webhook's timeout (10 s); the webhook fails open, so
// a test that stopped cannot block anyone. The returned stop removes the webhook and the server.
func (s *Stack) Intercept(ctx context.Context, name string, ops []admissionregistrationv1.OperationType, fn func(*admissionv1.AdmissionRequest)) (stop func(), err error) {
	certFile, keyFile, err := s.webhookCert()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("intercept: load certificate: %w", err)
	}
	ca, err := os.ReadFile(filepath.Join(s.Dir, "webhook-ca.crt"))
	if err != nil {
		return nil, fmt.Errorf("intercept: read webhook CA: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("intercept: listen: %w", err)
	}
	srv := &http.Server{
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var review admissionv1.AdmissionReview
			if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
				http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
				return
			}
			fn(review.Request)
			review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
			review.Request = nil
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(&review)
		}),
	}
	go func() { // owned: stop shuts it down
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(s.log, "stack: intercept webhook %s: %v\n", name, err)
		}
	}()
	url := "https://" + ln.Addr().String() + "/intercept"
	ignore := admissionregistrationv1.Ignore
	none := admissionregistrationv1.SideEffectClassNone
	timeout := int32(10)
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         name + ".e2e.aicr.run",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: ops, Rule: admissionregistrationv1.Rule{
				APIGroups: []string{"argoproj.io"}, APIVersions: []string{"v1alpha1"}, Resources: []string{"applications"}}}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": EngineNamespace}},
			FailurePolicy:     &ignore, SideEffects: &none, TimeoutSeconds: &timeout, AdmissionReviewVersions: []string{"v1"},
		}},
	}
	hooks := s.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := hooks.Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		_ = srv.Close()
		return nil, fmt.Errorf("intercept: register webhook %s: %w", name, err)
	}
	return func() {
		_ = hooks.Delete(context.Background(), name, metav1.DeleteOptions{})
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
}
