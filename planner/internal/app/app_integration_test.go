//go:build integration

package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/aicr-run/aicr-operator/servicekit/service"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/testkit/natstest"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

const (
	// readyTimeout bounds the wait for /readyz.
	readyTimeout = time.Minute
	// exitTimeout bounds a clean exit after cancel.
	exitTimeout = 30 * time.Second
)

// The API server logs every list, watch and get of an Application, which
// TestBinaryListsAndWatchesOnlyOwnedApplications reads.
func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, testenv.Options{AuditApplications: true}))
}

// applicationReads are the planner's lists, watches and gets of Applications in the audit log.
func applicationReads(t *testing.T) []testenv.AuditEvent {
	t.Helper()
	return testenv.Current(t).ApplicationReads(t, service.UserAgent(Name))
}

// An Argo CD namespace shared with other tools: the planner lists and watches only the
// Applications the operator owns, and reads no other one, whether they were there before it
// started or came after.
func TestBinaryListsAndWatchesOnlyOwnedApplications(t *testing.T) {
	env := testenv.Current(t)
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "argocd"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	argo, err := argoapp.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	const foreign = 300
	create := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			labels := fmt.Sprintf(`{%q:"another-tool"}`, v1alpha1.LabelManagedBy)
			if i%2 == 1 {
				labels = "{}"
			}
			body := fmt.Sprintf(`{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","metadata":{"name":"foreign-%03d","namespace":"argocd","labels":%s},`+
				`"spec":{"project":"default","destination":{"server":"https://kubernetes.default.svc","namespace":"other"},"source":{"repoURL":"https://example.com/charts","path":".","targetRevision":"HEAD"}}}`, i, labels)
			if err := argo.RESTClient().Post().Namespace("argocd").Resource(argoapp.ResourceApplications).Body([]byte(body)).Do(ctx).Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	create(0, foreign/2)
	srv := natstest.Start(t)
	o, _ := options(t, env, srv.URL)
	cancel, done := run(o)
	listing := func() int {
		n := 0
		for _, e := range applicationReads(t) {
			if e.Verb == "list" || e.Verb == "watch" {
				n++
			}
		}
		return n
	}
	err = testenv.WaitFor(ctx, readyTimeout, "the planner's list or watch of Applications in the audit log", func(context.Context) (bool, error) {
		select {
		case err := <-done:
			return false, fmt.Errorf("planner exited: %v", err)
		default:
		}
		return listing() > 0, nil
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	create(foreign/2, foreign)
	waitExit(t, cancel, done)

	selector := labels.SelectorFromSet(labels.Set{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}).String()
	for _, e := range applicationReads(t) {
		u, err := url.Parse(e.RequestURI)
		if err != nil {
			t.Fatalf("audit request URI %q: %v", e.RequestURI, err)
		}
		switch e.Verb {
		case "list", "watch":
			if got := u.Query().Get("labelSelector"); got != selector {
				t.Errorf("the planner's %s %s selects %q, want %q", e.Verb, e.RequestURI, got, selector)
			}
		default:
			if strings.HasPrefix(e.ObjectRef.Name, "foreign-") {
				t.Errorf("the planner read a foreign Application: %s %s", e.Verb, e.RequestURI)
			}
		}
	}
}

func options(t *testing.T, env *testenv.Env, natsURL string) (Options, string) {
	t.Helper()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	var o Options
	fs := flag.NewFlagSet(Name, flag.ContinueOnError)
	o.BindFlags(fs)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := fs.Parse([]string{"--kubeconfig", env.Kubeconfig, "--nats-url", natsURL, "--health-addr", addr, "--metrics-addr", "", "--namespace", "aicr-system", "--log-level", "warn", "--registry-repository", "registry.example.com/aicr"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	return o, "http://" + addr + "/readyz"
}

func readyz(ctx context.Context, url string) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

func run(o Options) (context.CancelFunc, <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()
	return cancel, done
}

func waitExit(t *testing.T, cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v after cancel, want a clean exit", err)
		}
	case <-time.After(exitTimeout):
		t.Fatalf("Run did not return within %s of cancel", exitTimeout)
	}
}

func TestBinaryStartsReadyAndStopsCleanly(t *testing.T) {
	env := testenv.Current(t)
	srv := natstest.Start(t)
	o, url := options(t, env, srv.URL)
	cancel, done := run(o)
	err := testenv.WaitFor(context.Background(), readyTimeout, "planner /readyz 200", func(ctx context.Context) (bool, error) {
		select {
		case err := <-done:
			return false, fmt.Errorf("planner exited: %v", err)
		default:
		}
		code, err := readyz(ctx, url)
		return code == http.StatusOK, err
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	waitExit(t, cancel, done)
}

func TestBinaryWithoutNATSStaysNotReady(t *testing.T) {
	env := testenv.Current(t)
	port, err := testenv.FreePort() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	o, url := options(t, env, fmt.Sprintf("nats://127.0.0.1:%d", port))
	cancel, done := run(o)
	// The health server answers, and keeps answering 503, while the planner waits for NATS.
	notReady := 0
	err = testenv.WaitFor(context.Background(), readyTimeout, "three 503 answers from /readyz", func(ctx context.Context) (bool, error) {
		select {
		case err := <-done:
			return false, fmt.Errorf("planner exited without NATS: %v", err)
		default:
		}
		code, err := readyz(ctx, url)
		if err != nil {
			return false, err
		}
		if code == http.StatusOK {
			return false, fmt.Errorf("/readyz is 200 without NATS")
		}
		notReady++
		return notReady >= 3, nil
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	waitExit(t, cancel, done)
}
