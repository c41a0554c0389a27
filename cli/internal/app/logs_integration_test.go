//go:build integration

package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// logLine is a line as the binaries write it (servicekit/logging: RFC 3339 UTC with
// milliseconds, component, level, message, the shared fields).
func logLine(at time.Time, component, level, msg string, fields ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"level":%q,"component":%q`, level, component)
	for i := 0; i+1 < len(fields); i += 2 {
		fmt.Fprintf(&b, `,%q:%q`, fields[i], fields[i+1])
	}
	fmt.Fprintf(&b, `,"time":%q,"message":%q}`, at.UTC().Format("2006-01-02T15:04:05.000Z07:00"), msg)
	return b.String() + "\n"
}

func writeLog(t *testing.T, path string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(strings.Join(lines, "")); err != nil {
		t.Fatal(err)
	}
}

// logs reads the local stack's log folder as it reads pods: the binaries' files (not the NATS
// server's or the API server's) merged by time, filtered by rollout and step, text or JSON, and
// followed with -f.
func TestLogsOfTheLocalStack(t *testing.T) {
	env := testenv.Current(t)
	dir := t.TempDir()
	t0 := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	writeLog(t, filepath.Join(dir, "planner.log"),
		logLine(ms(0), "planner", "info", "rollout created", "rollout", "r-aa-none", "runtime", "cluster"),
		logLine(ms(10), "planner", "info", "step started", "step", "r-aa-none/1", "release", "cert-manager", "reason", "StepStarted"),
		logLine(ms(40), "planner", "info", "step started", "step", "r-aa-none/2", "release", "nfd", "reason", "StepStarted"),
		logLine(ms(50), "planner", "info", "rollout created", "rollout", "r-bb-aa"))
	writeLog(t, filepath.Join(dir, "applier-1.log"),
		logLine(ms(20), "applier", "info", "application written", "step", "r-aa-none/1", "release", "cert-manager", "outcome", "Written"),
		"panic: not a JSON line\n")
	writeLog(t, filepath.Join(dir, "readiness.log"),
		logLine(ms(30), "readiness", "info", "verdict published", "msg_id", "r-aa-none/1/1/0badcafe", "release", "cert-manager"))
	writeLog(t, filepath.Join(dir, "nats-server.log"), logLine(ms(5), "nats", "info", "not ours", "rollout", "r-aa-none"))

	code, stdout, stderr := kubectl(t, env, "logs", "--log-dir", dir, "--rollout", "r-aa-none")
	if code != 0 {
		t.Fatalf("logs: exit %d: %s", code, stderr)
	}
	want := strings.Join([]string{
		"03:00:00.000 planner       INFO  rollout created rollout=r-aa-none runtime=cluster",
		"03:00:00.010 planner       INFO  step started step=r-aa-none/1 release=cert-manager reason=StepStarted",
		"03:00:00.020 applier       INFO  application written step=r-aa-none/1 release=cert-manager outcome=Written",
		"03:00:00.030 readiness     INFO  verdict published release=cert-manager msg_id=r-aa-none/1/1/0badcafe",
		"03:00:00.040 planner       INFO  step started step=r-aa-none/2 release=nfd reason=StepStarted",
	}, "\n") + "\n"
	if stdout != want {
		t.Errorf("logs --rollout r-aa-none:\n%s\nwant:\n%s", stdout, want)
	}
	if !strings.Contains(stderr, "1 line(s) that are not JSON objects left out") {
		t.Errorf("stderr %q: want the left-out line counted", stderr)
	}

	code, stdout, _ = kubectl(t, env, "logs", "--log-dir", dir, "--rollout", "r-aa-none", "--step", "1", "-o", "json")
	got := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(got) != 3 || !strings.Contains(got[0], `"message":"step started"`) || !strings.Contains(got[1], `"component":"applier"`) || !strings.Contains(got[2], `"msg_id":"r-aa-none/1/1/0badcafe"`) {
		t.Errorf("logs --step 1 -o json: exit %d:\n%s", code, stdout)
	}
	if code, _, stderr := kubectl(t, env, "logs", "--log-dir", dir, "--step", "1"); code != 2 || !strings.Contains(stderr, `--step "1": give --rollout too, or the step's ID ROLLOUT/N`) {
		t.Errorf("--step without --rollout: exit %d, %q", code, stderr)
	}

	// -f prints what is appended, filtered, until stopped.
	out, _, _ := background(t, env, "logs", "--log-dir", dir, "--rollout", "r-bb-aa", "-f")
	waitOutput(t, out, "the existing line", func(s string) bool { return strings.Contains(s, "rollout created rollout=r-bb-aa") })
	writeLog(t, filepath.Join(dir, "applier-1.log"),
		logLine(ms(60), "applier", "info", "not this rollout", "step", "r-aa-none/3"),
		logLine(ms(70), "applier", "warn", "blocked by the finalizer", "step", "r-bb-aa/1", "outcome", "Blocked"))
	waitOutput(t, out, "the appended line", func(s string) bool { return strings.Contains(s, "WARN  blocked by the finalizer step=r-bb-aa/1") })
	if strings.Contains(out.String(), "not this rollout") {
		t.Errorf("-f printed another rollout's line:\n%s", out.String())
	}
}

// Against the API server, logs reads the pods of the five Deployments: with none it says where
// to look instead (a pod of the chart's NATS is not one of them); a binary's pod is read (this
// environment runs no kubelet: the API server answers a pod without a node with no lines).
func TestLogsOfPods(t *testing.T) {
	env := testenv.Current(t)
	ensureNamespace(t, env, opNamespace)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	// No controller makes the namespace's default ServiceAccount here, and admission wants it.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: opNamespace}}
	if _, err := kc.CoreV1().ServiceAccounts(opNamespace).Create(context.Background(), sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod := func(name, component string) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: opNamespace,
			Labels: map[string]string{"app.kubernetes.io/part-of": "aicr-operator", "app.kubernetes.io/component": component}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: component, Image: component + ":v1"}}}}
		if _, err := kc.CoreV1().Pods(opNamespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			zero := int64(0)
			_ = kc.CoreV1().Pods(opNamespace).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		})
	}
	pod("aicr-operator-nats-0", "nats")
	code, _, stderr := kubectl(t, env, "logs")
	if code != 1 || !strings.Contains(stderr, "no pod of the operator's binaries in aicr-system") || !strings.Contains(stderr, "--log-dir") {
		t.Errorf("logs without a binary's pod: exit %d, %q", code, stderr)
	}
	pod("aicr-operator-planner-0", "planner")
	if code, stdout, stderr := kubectl(t, env, "logs", "--rollout", "r-1"); code != 0 || stdout != "" || stderr != "" {
		t.Errorf("logs of a planner pod without a node: exit %d, %q, %q; want it read, and no line", code, stdout, stderr)
	}
}
