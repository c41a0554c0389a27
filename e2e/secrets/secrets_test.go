//go:build e2e

package secrets

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	"github.com/aicr-run/aicr-operator/e2e/stacktest"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// tapReadTimeout bounds reading a message the tap already holds.
const tapReadTimeout = 10 * time.Second

// plantedPrefix marks the planted secret, so a leak is unmistakable in any output.
const plantedPrefix = "AICR-PLANTED-SECRET-"

// leakForms are the shapes a secret leaks in: clear, base64 (a Secret's data), the registry's
// basic-auth header (base64 user:password) and an ECR authorization token (base64 AWS:password).
func leakForms(user, secret string) map[string]string {
	b64 := base64.StdEncoding.EncodeToString
	return map[string]string{
		"clear":             secret,
		"base64":            b64([]byte(secret)),
		"base64 basic auth": b64([]byte(user + ":" + secret)),
		"ECR token":         stack.ECRToken(secret),
	}
}

// finding is one place a planted secret showed up.
type finding struct{ where, form string }

// scanner looks for every leak form in the outputs it is shown.
type scanner struct {
	forms    map[string]string
	findings []finding
	scanned  map[string]int
}

func (s *scanner) scan(kind, where string, data []byte) {
	s.scanned[kind]++
	for form, v := range s.forms {
		if bytes.Contains(data, []byte(v)) {
			s.findings = append(s.findings, finding{where: kind + " " + where, form: form})
		}
	}
}

func (s *scanner) scanJSON(kind, where string, obj any) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("encode %s %s: %w", kind, where, err)
	}
	s.scan(kind, where, data)
	return nil
}

// TestNoSecretInAnyOutput plants a registry password into everything that holds registry
// credentials (the registry itself, the repo-creds Secret and the per-chart repository
// Secrets), rolls the example bundle out with it, breaks the repo-creds Secret so credrefresher
// reports it (the error path) and repairs it, every binary logging at debug level. Then no log
// line of any binary, no Event in any namespace, no ClusterRuntime or RuntimeRollout, no
// operator Application or plan, and no NATS message holds the password, in clear or base64:
// neither a message still in a stream nor any message as it was published (a command leaves
// the work queue once acknowledged, so it is watched live).
func TestNoSecretInAnyOutput(t *testing.T) {
	s := stacktest.Need(t)
	ctx := t.Context()
	secret := plantedPrefix + stack.RandomPassword()[:24]
	user := s.Env.Registry.Auth.Username
	live := tapNATS(t, s)

	// Every holder of the registry's credentials gets the planted password.
	if err := s.RotateRegistryPassword(ctx, secret); err != nil {
		t.Fatal(err)
	}
	engineSecrets := s.Kube.CoreV1().Secrets(stack.EngineNamespace)
	list, err := engineSecrets.List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelArgoSecretType})
	if err != nil {
		t.Fatal(err)
	}
	planted := 0
	for i := range list.Items {
		sec := &list.Items[i]
		if _, ok := sec.Data["password"]; !ok {
			continue
		}
		sec.Data["password"] = []byte(secret)
		if _, err := engineSecrets.Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("plant the password in Secret %s: %v", sec.Name, err)
		}
		planted++
	}
	if planted == 0 {
		t.Fatal("no Secret in the engine namespace holds registry credentials to plant the password in")
	}
	t.Logf("planted the registry password in the registry and %d Secrets", planted)

	bundle, err := s.ExampleBundle("1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	stacktest.RolledOut(t, s, bundle, stack.DefaultRuntimeSpec())

	// The error path: a repo-creds Secret without a username is reported by field, then repaired.
	patch := func(body string) {
		t.Helper()
		if _, err := engineSecrets.Patch(ctx, stack.RepoCredsSecret, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
			t.Fatalf("patch the repo-creds Secret: %v", err)
		}
	}
	patch(`{"data":{"username":null}}`)
	rt, err := s.WaitCondition(ctx, stacktest.ChangeTimeout, v1alpha1.ConditionResolved, metav1.ConditionFalse, v1alpha1.ReasonRegistryCredentialsUnavailable)
	if err != nil {
		t.Fatal(err)
	}
	if rt.Status.Credentials == nil || !strings.Contains(rt.Status.Credentials.Message, "username") {
		t.Errorf("status.credentials %+v; want the missing username named", rt.Status.Credentials)
	}
	patch(`{"stringData":{"username":"` + user + `"}}`)
	if _, err := s.WaitCondition(ctx, stacktest.ChangeTimeout, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut); err != nil {
		t.Fatal(err)
	}

	sc := &scanner{forms: leakForms(user, secret), scanned: map[string]int{}}
	// The control: the scanner finds the password where it belongs, in the repo-creds Secret.
	creds, err := engineSecrets.Get(ctx, stack.RepoCredsSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	control := &scanner{forms: sc.forms, scanned: map[string]int{}}
	if err := control.scanJSON("Secret", creds.Name, creds); err != nil {
		t.Fatal(err)
	}
	if len(control.findings) == 0 {
		t.Fatal("the scanner does not find the planted password in the repo-creds Secret itself")
	}
	scanLogs(t, sc, filepath.Join(s.Dir, "logs"))
	scanEvents(t, s, sc)
	scanOperatorObjects(t, s, sc)
	scanNATS(t, s, sc)
	commands := live.scan(t, sc)
	t.Logf("scanned %v", sc.scanned)
	if commands == 0 {
		t.Errorf("the live scan saw no command: it did not watch the messages before they were acknowledged")
	}
	for _, f := range sc.findings {
		t.Errorf("the planted secret (%s) is in %s", f.form, f.where)
	}
	if sc.scanned["log"] < len(stack.Binaries) || sc.scanned["nats message"] == 0 || sc.scanned["live nats message"] == 0 || sc.scanned["event"] == 0 {
		t.Errorf("scanned %v; want every binary's log, Events and NATS messages", sc.scanned)
	}
}

// scanLogs scans every file under dir: the binaries' logs.
func scanLogs(t *testing.T, sc *scanner, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if len(data) == 0 {
			return fmt.Errorf("log %s is empty: nothing was captured", path)
		}
		sc.scan("log", filepath.Base(path), data)
		return nil
	})
	if err != nil {
		t.Fatalf("scan logs: %v", err)
	}
}

// scanEvents scans every Event in every namespace (core/v1, which events.k8s.io/v1 also serves).
func scanEvents(t *testing.T, s *stack.Stack, sc *scanner) {
	t.Helper()
	evs, err := s.Kube.CoreV1().Events(metav1.NamespaceAll).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	for i := range evs.Items {
		ev := &evs.Items[i]
		if err := sc.scanJSON("event", ev.Namespace+"/"+ev.Name+" ("+ev.Reason+")", ev); err != nil {
			t.Fatal(err)
		}
	}
}

// scanOperatorObjects scans the ClusterRuntime and every RuntimeRollout (spec and status), the
// operator's Applications, its plan ConfigMaps and the ConfigMaps that hold rollouts' steps.
func scanOperatorObjects(t *testing.T, s *stack.Stack, sc *scanner) {
	t.Helper()
	ctx := t.Context()
	rts, err := s.Dynamic.Resource(v1alpha1.ClusterRuntimeResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range rts.Items {
		if err := sc.scanJSON("ClusterRuntime", o.GetName(), o.Object); err != nil {
			t.Fatal(err)
		}
	}
	ros, err := s.Dynamic.Resource(v1alpha1.RuntimeRolloutResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range ros.Items {
		if err := sc.scanJSON("RuntimeRollout", o.GetName(), o.Object); err != nil {
			t.Fatal(err)
		}
	}
	apps, err := s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace).List(ctx,
		metav1.ListOptions{LabelSelector: v1alpha1.LabelManagedBy + "=" + v1alpha1.ManagedByValue})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range apps.Items {
		if err := sc.scanJSON("Application", o.GetName(), o.Object); err != nil {
			t.Fatal(err)
		}
	}
	plans, err := s.Kube.CoreV1().ConfigMaps(stack.OperatorNamespace).List(ctx,
		metav1.ListOptions{LabelSelector: v1alpha1.LabelRole + "=" + v1alpha1.PlanRoleValue})
	if err != nil {
		t.Fatal(err)
	}
	for i := range plans.Items {
		if err := sc.scanJSON("plan", plans.Items[i].Name, &plans.Items[i]); err != nil {
			t.Fatal(err)
		}
	}
	steps, err := s.Kube.CoreV1().ConfigMaps(stack.OperatorNamespace).List(ctx,
		metav1.ListOptions{LabelSelector: v1alpha1.LabelRole + "=" + v1alpha1.StepsRoleValue})
	if err != nil {
		t.Fatal(err)
	}
	for i := range steps.Items {
		if err := sc.scanJSON("rollout steps", steps.Items[i].Name, &steps.Items[i]); err != nil {
			t.Fatal(err)
		}
	}
}

// tap is a subscription to every bus subject, started before the rollout: core NATS delivers
// each published message to it, before any consumer acknowledges it.
type tap struct{ sub *nats.Subscription }

// tapNATS subscribes to every bus subject as the stack's observer.
func tapNATS(t *testing.T, s *stack.Stack) *tap {
	t.Helper()
	nc, err := s.ConnectNATS(t.Context(), "secrets-tap")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	sub, err := nc.SubscribeSync(bus.Prefix + ".>")
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &tap{sub: sub}
}

// scan scans every message the tap received and returns how many were commands.
func (tp *tap) scan(t *testing.T, sc *scanner) int {
	t.Helper()
	defer func() { _ = tp.sub.Unsubscribe() }()
	commands := 0
	for {
		n, _, err := tp.sub.Pending()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return commands
		}
		msg, err := tp.sub.NextMsg(tapReadTimeout) // one is pending: this returns at once
		if err != nil {
			t.Fatalf("read a tapped message: %v", err)
		}
		if bus.MatchSubject(bus.SubjectCommands, msg.Subject) {
			commands++
		}
		hdr, _ := json.Marshal(msg.Header)
		sc.scan("live nats message", msg.Subject, append(hdr, msg.Data...))
	}
}

// scanNATS scans every message still in the commands and events streams.
func scanNATS(t *testing.T, s *stack.Stack, sc *scanner) {
	t.Helper()
	ctx := t.Context()
	js := stacktest.Observer(t, s, "secrets-scan")
	for _, name := range []string{bus.StreamCommands, bus.StreamEvents} {
		stream, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		info, err := stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
			msg, err := stream.GetMsg(ctx, seq)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue // acknowledged commands leave the work queue
			}
			if err != nil {
				t.Fatalf("read %s message %d: %v", name, seq, err)
			}
			hdr, _ := json.Marshal(msg.Header)
			sc.scan("nats message", fmt.Sprintf("%s #%d %s", name, seq, msg.Subject), append(hdr, msg.Data...))
		}
	}
}
