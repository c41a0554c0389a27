package app

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aicr-run/aicr-operator/admission/internal/webhook"
	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/natstest"
	"github.com/aicr-run/aicr-operator/testkit/servicetest"
	"github.com/aicr-run/aicr-operator/testkit/tlstest"
)

const (
	// startTimeout bounds the binary becoming ready.
	startTimeout = 30 * time.Second
	// stopTimeout bounds a clean exit after cancel.
	stopTimeout = 20 * time.Second
	applier     = "system:serviceaccount:aicr-system:aicr-operator-applier"
)

// fakeAPIServer answers the API server's /readyz, the only call the webhook makes when no
// ClusterRuntime is reviewed; it returns a kubeconfig for it.
func fakeAPIServer(t *testing.T) string {
	t.Helper()
	return servicetest.FakeAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		http.NotFound(w, r)
	})
}

// TestBinaryStartsServesAndStopsCleanly runs the binary against an in-process NATS that
// requires TLS, under its own NATS identity: /readyz turns ready, a denial is answered over TLS
// and published on the audit subject (on the stream the planner's identity declared) with the
// request UID as message ID, and cancelling the context exits 0.
func TestBinaryStartsServesAndStopsCleanly(t *testing.T) {
	ns := natstest.StartWith(t, natstest.Options{TLS: true, Identities: true})
	_, planner := ns.ConnectAs(t, v1alpha1.BinaryPlanner)
	if _, err := dispatch.EnsureSetup(t.Context(), planner, 1); err != nil {
		t.Fatalf("the planner's stream setup: %v", err)
	}
	pair := tlstest.NewServing(t, "aicr-operator-admission")
	certFile, keyFile := pair.Write(t, t.TempDir())
	health, metrics, hook := servicetest.FreeAddr(t), servicetest.FreeAddr(t), servicetest.FreeAddr(t)
	args := []string{
		"--nats-url=" + ns.URL, "--nats-user=" + v1alpha1.BinaryAdmission, "--nats-password-file=" + ns.PasswordFiles[v1alpha1.BinaryAdmission],
		"--nats-tls-ca=" + ns.TLS.CA, "--kubeconfig=" + fakeAPIServer(t),
		"--health-addr=" + health, "--metrics-addr=" + metrics, "--webhook-addr=" + hook,
		"--tls-cert-file=" + certFile, "--tls-key-file=" + keyFile,
		"--operator-identities=" + applier + ",system:serviceaccount:aicr-system:aicr-operator-planner",
		"--log-level=warn",
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stderr bytes.Buffer
	exit := make(chan int, 1)
	go func() { exit <- Main(ctx, args, &stderr) }()

	servicetest.Poll(t, startTimeout, "/readyz", func() error {
		resp, err := http.Get("http://" + health + "/readyz")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%d %s", resp.StatusCode, body)
		}
		return nil
	})

	review := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"audit-uid-1",` +
		`"resource":{"group":"argoproj.io","version":"v1alpha1","resource":"applications"},"operation":"DELETE",` +
		`"userInfo":{"username":"` + applier + `"},"namespace":"argocd","name":"gpu-operator",` +
		`"oldObject":{"metadata":{"name":"gpu-operator","namespace":"argocd","finalizers":["resources-finalizer.argocd.argoproj.io"]}}}}`
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pair.Pool()}}}
	resp, err := client.Post("https://"+hook+webhook.Path, "application/json", strings.NewReader(review))
	if err != nil {
		t.Fatalf("POST review: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !strings.Contains(string(body), `"allowed":false`) {
		t.Fatalf("review answer %d %s; want a denial", resp.StatusCode, body)
	}

	_, js := ns.Connect(t)
	var got bus.AdmissionDenial
	servicetest.Poll(t, startTimeout, "audit record", func() error {
		stream, err := js.Stream(t.Context(), bus.StreamEvents)
		if err != nil {
			return err
		}
		msg, err := stream.GetLastMsgForSubject(t.Context(), bus.SubjectAudit)
		if err != nil {
			return err
		}
		if id := msg.Header.Get(jetstream.MsgIDHeader); id != "audit-uid-1" {
			return fmt.Errorf("message ID %q", id)
		}
		return json.Unmarshal(msg.Data, &got)
	})
	want := bus.AdmissionDenial{UID: "audit-uid-1", User: applier, Operation: "DELETE", Resource: "argoproj.io/applications",
		Namespace: "argocd", Name: "gpu-operator", Rule: "application-finalizer", Field: "metadata.finalizers"}
	got.Header, got.Message = bus.Header{}, ""
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit record (-want +got):\n%s", diff)
	}

	resp, err = http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	body, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !strings.Contains(string(body), `aicr_admission_denials_total{rule="application-finalizer"} 1`) {
		t.Errorf("/metrics lacks the denial count:\n%s", body)
	}

	cancel()
	select {
	case code := <-exit:
		if code != 0 {
			t.Errorf("exit code %d; want 0 (stderr: %s)", code, stderr.String())
		}
	case <-time.After(stopTimeout):
		t.Fatalf("no exit within %s after cancel", stopTimeout)
	}
}

// TestValidateNamesTheFlag proves bad flags are refused naming the flag and what is accepted.
func TestValidateNamesTheFlag(t *testing.T) {
	cases := map[string]struct {
		args []string
		want string
	}{
		"no certificate": {
			args: []string{"--operator-identities=a"},
			want: "--tls-cert-file and --tls-key-file are required: the webhook serves HTTPS only",
		},
		"no identities": {
			args: []string{"--tls-cert-file=c", "--tls-key-file=k", "--operator-identities= , "},
			want: "--operator-identities is required: the usernames of the operator's service accounts, comma-separated",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fs := flag.NewFlagSet(Name, flag.ContinueOnError)
			var o Options
			o.BindFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			if err == nil || err.Error() != tc.want {
				t.Errorf("Validate = %v; want %q", err, tc.want)
			}
		})
	}
}
