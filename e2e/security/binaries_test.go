//go:build integration

package security

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/aicr-run/aicr-operator/e2e/charttest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/shared/plan"
	"github.com/aicr-run/aicr-operator/testkit/servicetest"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
	"github.com/aicr-run/aicr-operator/testkit/tlstest"
)

// Named timeouts.
const (
	// readyTimeout bounds a binary's /readyz turning 200 (NATS connected, streams declared): a
	// few seconds on an idle machine, the rest is headroom for a loaded one.
	readyTimeout = 3 * time.Minute
	// resultTimeout bounds a command's round trip through the applier, or a denial's audit record.
	resultTimeout = time.Minute
	// stopTimeout bounds a clean exit after SIGTERM.
	stopTimeout = 30 * time.Second
)

// lockedBuffer collects a process's output.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startBinary runs one built binary (its real Main) with args, waits for its /readyz and stops
// it with SIGTERM when the test ends, requiring exit 0. It returns the process's output.
func startBinary(t *testing.T, name string, args ...string) *lockedBuffer {
	t.Helper()
	health := servicetest.FreeAddr(t)
	args = append(args, "--health-addr="+health, "--metrics-addr="+servicetest.FreeAddr(t), "--log-format=json", "--log-level=debug")
	out := &lockedBuffer{}
	cmd := exec.Command(filepath.Join(binDir, name), args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-exited:
				if err != nil {
					t.Errorf("%s exited with %v after SIGTERM; output:\n%s", name, err, out)
				}
			case <-time.After(stopTimeout):
				_ = cmd.Process.Kill()
				t.Errorf("%s did not stop within %s of SIGTERM", name, stopTimeout)
			}
			for _, r := range servicetest.RaceReports([]byte(out.String())) { // race-built binaries
				t.Errorf("DATA RACE in %s's output:\n%s", name, r)
			}
		})
	}
	t.Cleanup(stop)
	err := testenv.WaitFor(t.Context(), readyTimeout, name+" ready", func(ctx context.Context) (bool, error) {
		select {
		case err := <-exited:
			exited <- err
			return false, fmt.Errorf("%s exited (%v); output:\n%s", name, err, out)
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+health+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("%v; output:\n%s", err, out)
	}
	return out
}

// servingCert writes a serving certificate for 127.0.0.1 (tlstest) and returns the files and
// a pool that trusts its CA.
func servingCert(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	f, err := tlstest.Write(t.TempDir(), "aicr-admission")
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return f.ServerCert, f.ServerKey, pool
}

// observe connects as the test's observer, which may read every stream.
func observe(t *testing.T, n *charttest.NATS) jetstream.JetStream {
	t.Helper()
	var nc *nats.Conn
	err := testenv.WaitFor(t.Context(), connectTimeout, "connect as the observer", func(context.Context) (bool, error) {
		var err error
		nc, err = nats.Connect(n.URL, append(n.ObserverOptions(t), nats.Timeout(connectTimeout))...)
		return err == nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// noViolations fails when a binary's output reports a NATS permissions violation: a binary that
// works under its identity never tries a subject it may not use.
func noViolations(t *testing.T, name string, out *lockedBuffer) {
	t.Helper()
	if strings.Contains(strings.ToLower(out.String()), "permissions violation") {
		t.Errorf("%s hit a NATS permissions violation under its own identity:\n%s", name, out)
	}
}

// TestBinariesRunUnderTheirChartIdentities runs the five real binaries with --nats-user,
// --nats-password-file and --nats-tls-ca against the chart's NATS configuration (TLS required,
// the table's permissions): the planner declares the streams and both durable consumers, the
// others bind and turn ready; the applier consumes an apply command (published by the planner's
// identity), writes the Application and publishes its result; the webhook denies a review and
// publishes the audit record; readiness and credrefresher publish their reports. None hits a
// permissions violation: each calls only what its identity may.
func TestBinariesRunUnderTheirChartIdentities(t *testing.T) {
	env := testenv.Current(t)
	ctx := t.Context()
	n := charttest.StartNATS(t, charttest.NATSOptions{LoopbackTLS: true, Observer: true})
	kube := kubernetes.NewForConfigOrDie(env.Config)
	for _, ns := range []string{"aicr-system", "argocd"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	b, err := plan.ParseBundle([]byte(`apiVersion: bundle.aicr.run/v1alpha1
kind: Bundle
metadata: {name: security, version: 1.0.0}
components:
- {name: nfd, namespace: nfd, chart: {path: charts/nfd, digest: "sha256:` + strings.Repeat("a", 64) + `"}, values: {a: 1}}
`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Resolve(b, plan.Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	cm, err := p.ConfigMap("aicr-system")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps("aicr-system").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("store plan: %v", err)
	}

	nats := func(user string) []string {
		return []string{"--nats-url=" + n.URL, "--nats-user=" + user, "--nats-password-file=" + n.PasswordFiles[user],
			"--nats-tls-ca=" + n.CAFile, "--kubeconfig=" + env.Kubeconfig, "--namespace=aicr-system"}
	}
	certFile, keyFile, pool := servingCert(t)
	hook := servicetest.FreeAddr(t)
	admissionOut := startBinary(t, "admission", append(nats("admission"),
		"--tls-cert-file="+certFile, "--tls-key-file="+keyFile, "--webhook-addr="+hook, "--engine-namespace=argocd",
		"--operator-identities=system:serviceaccount:aicr-system:aicr-operator-applier")...)
	applierOut := startBinary(t, "applier", append(nats("applier"),
		"--engine-namespace=argocd", "--engine-project=aicr", "--registry-repository=registry.example.com/aicr")...)
	others := map[string]*lockedBuffer{
		"planner": startBinary(t, "planner", append(nats("planner"), "--registry-repository=registry.example.com/aicr",
			"--operator-identities=system:serviceaccount:aicr-system:aicr-operator-applier")...),
		"readiness": startBinary(t, "readiness", append(nats("readiness"), "--engine-namespace=argocd", "--engine-project=aicr", "--registry-repository=registry.example.com/aicr")...),
		"credrefresher": startBinary(t, "credrefresher", append(nats("credrefresher"), "--registry-auth=static",
			"--registry-repository=registry.example.com/aicr", "--engine-namespace=argocd", "--repo-creds-secret=aicr-registry")...),
	}

	planner := connectAs(t, n, v1alpha1.BinaryPlanner)
	observer := observe(t, n)
	var events jetstream.Stream
	err = testenv.WaitFor(ctx, readyTimeout, "the planner to declare the events stream", func(ctx context.Context) (bool, error) {
		var err error
		events, err = observer.Stream(ctx, bus.StreamEvents)
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("%v; planner output:\n%s", err, others["planner"])
	}

	t.Run("the applier consumes a command and publishes its result", func(t *testing.T) {
		cmd := bus.NewApplyCommand("cluster", "uid-security", bus.StepRef{Rollout: "r1", Index: 1, ID: "r1/1", Started: time.Now()}, "nfd",
			v1alpha1.ActionInstall, p.Digest(), false, nil)
		if err := bus.NewPublisher(planner.js, "planner").Publish(ctx, bus.ApplySubject("cluster", "nfd"), "r1/1/1", cmd); err != nil {
			t.Fatalf("the planner's identity publishes a command: %v", err)
		}
		var got bus.ApplyResult
		err := testenv.WaitFor(ctx, resultTimeout, "the applier's result", func(ctx context.Context) (bool, error) {
			msg, err := events.GetLastMsgForSubject(ctx, bus.AppliedSubject("cluster", "nfd"))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			return true, json.Unmarshal(msg.Data, &got)
		})
		if err != nil {
			t.Fatalf("%v; applier output:\n%s", err, applierOut)
		}
		if got.CommandID != "r1/1/1" || got.Outcome != bus.OutcomeWritten {
			t.Errorf("result %+v; want command r1/1/1 Written", got)
		}
		noViolations(t, "applier", applierOut)
	})

	t.Run("readiness and credrefresher publish their reports and the planner consumes", func(t *testing.T) {
		for subject, who := range map[string]string{bus.SubjectEngine: "readiness", bus.SubjectCredentials: "credrefresher"} {
			err := testenv.WaitFor(ctx, resultTimeout, who+"'s report on "+subject, func(ctx context.Context) (bool, error) {
				_, err := events.GetLastMsgForSubject(ctx, subject)
				if errors.Is(err, jetstream.ErrMsgNotFound) {
					return false, nil
				}
				return err == nil, err
			})
			if err != nil {
				t.Errorf("%v; %s output:\n%s", err, who, others[who])
			}
		}
		for _, c := range bus.Consumers() {
			stream, _, _ := bus.ConsumerConfig(c)
			if _, err := observer.Consumer(ctx, stream, c); err != nil {
				t.Errorf("the planner declared no durable consumer %s under its identity: %v", c, err)
			}
		}
		for name, out := range others {
			noViolations(t, name, out)
		}
	})

	t.Run("the webhook denies a review and publishes the audit record", func(t *testing.T) {
		obj, _ := json.Marshal(map[string]any{
			"apiVersion": "operator.aicr.run/v1alpha1", "kind": "ClusterRuntime", "metadata": map[string]any{"name": "not-cluster"},
			"spec": map[string]any{"bundle": map[string]any{"configMap": map[string]any{"name": "missing"}}},
		})
		uid := types.UID("security-review-1")
		review := admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: uid,
				Kind:      metav1.GroupVersionKind{Group: v1alpha1.Group, Version: "v1alpha1", Kind: "ClusterRuntime"},
				Resource:  metav1.GroupVersionResource{Group: v1alpha1.Group, Version: "v1alpha1", Resource: "clusterruntimes"},
				Name:      "not-cluster",
				Operation: admissionv1.Create, UserInfo: authenticationv1.UserInfo{Username: "admin"},
				Object: runtime.RawExtension{Raw: obj}},
		}
		body, _ := json.Marshal(review)
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
		resp, err := client.Post("https://"+hook+"/validate", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("POST the review: %v", err)
		}
		var answer admissionv1.AdmissionReview
		err = json.NewDecoder(resp.Body).Decode(&answer)
		_ = resp.Body.Close()
		if err != nil || answer.Response == nil || answer.Response.Allowed {
			t.Fatalf("answer %+v (%v); want a denial", answer.Response, err)
		}
		var denial bus.AdmissionDenial
		err = testenv.WaitFor(ctx, resultTimeout, "the audit record", func(ctx context.Context) (bool, error) {
			msg, err := events.GetLastMsgForSubject(ctx, bus.SubjectAudit)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			return true, json.Unmarshal(msg.Data, &denial)
		})
		if err != nil {
			t.Fatalf("%v; admission output:\n%s", err, admissionOut)
		}
		if denial.UID != string(uid) || denial.Name != "not-cluster" {
			t.Errorf("audit record %+v; want the denial of review %s", denial, uid)
		}
		noViolations(t, "admission", admissionOut)
	})
}
