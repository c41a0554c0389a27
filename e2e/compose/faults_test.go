//go:build compose

package compose

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/aicr-run/aicr-operator/e2e/composestack"
	"github.com/aicr-run/aicr-operator/e2e/stack"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// project is the test's docker-compose project (and network); make compose-demo's is another.
const project = "aicr-compose-e2e"

// A rollout on the compose stack completes through real faults, each injected once the
// rollout has moved since the last: the planner's NATS node disconnected from the network (the
// streams keep a quorum of two; the planner moves to another node and a step is done through
// it), the planner leader's container paused (docker pause: the process freezes, its
// Lease runs out), an applier's container restarted. Then every component is at its bundle
// digest, nothing is parked, no container logged a panic, and docker-compose down -v leaves
// nothing of the project.
func TestRolloutThroughNetworkFaults(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	root, err := composestack.Root(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := composestack.BuildImages(ctx, root, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	o := composestack.Options{Project: project, Root: root, Tools: tools, Log: testWriter{t}}
	_ = composestack.DownProject(ctx, o) // a run killed before its cleanup
	s, err := composestack.Up(ctx, o)
	if err != nil {
		if derr := composestack.DownProject(context.WithoutCancel(ctx), o); derr != nil {
			t.Log(derr)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if out, err := exec.Command(tools+"/docker-compose", "-p", project, "-f", root+"/deploy/compose/docker-compose.yaml",
				"--profile", composestack.Profile, "logs", "--no-color", "--tail", "40").CombinedOutput(); err == nil {
				t.Logf("the containers' last lines:\n%s", out)
			}
		}
		if err := s.Down(context.Background()); err != nil {
			t.Errorf("down: %v", err)
		}
		left, err := composestack.Leftovers(context.Background(), project)
		if err != nil || len(left) > 0 {
			t.Errorf("docker-compose down -v left %v (%v)", left, err)
		}
	})

	bundle, err := s.ExampleBundle("1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ApplyBundle(ctx, bundle); err != nil {
		t.Fatal(err)
	}
	spec := stack.DefaultRuntimeSpec()
	spec.Placement = &v1alpha1.Placement{Accelerated: &v1alpha1.NodePlacement{NodeSelector: map[string]string{stack.GPUNodeLabel: "true"}}}
	if err := s.ApplyRuntime(ctx, spec); err != nil {
		t.Fatal(err)
	}

	// Fault 1, as soon as a rollout exists: the NATS node the planner is connected to leaves the
	// network. The planner must notice (its pings go unanswered, about 3 s) and move to another
	// node, and the rollout goes on through it.
	done := waitSteps(ctx, t, s, 0)
	ips := natsAddresses(ctx, t, s)
	node := natsNodeOf(ctx, t, s, "planner", ips)
	lost := container(ctx, t, s, node)
	docker(ctx, t, "network", "disconnect", s.Network(), lost)
	t.Logf("%s, the planner's NATS node, disconnected at %d steps done", node, done)
	err = testenv.WaitFor(ctx, 2*time.Minute, "the planner connected to another NATS node than "+node, func(context.Context) (bool, error) {
		if now := natsNodeOf(ctx, t, s, "planner", ips); now == node {
			return false, fmt.Errorf("the planner's last connection is to %s", now)
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Fault 2, once a step more is done: the planner leader's container frozen, and while it is,
	// fault 3: an applier's container restarted.
	done = waitSteps(ctx, t, s, done+1)
	leader := plannerLeader(ctx, t, s)
	docker(ctx, t, "pause", leader)
	t.Logf("planner leader %s paused at %d steps done", leader[:12], done)
	docker(ctx, t, "restart", "--time", "10", container(ctx, t, s, "applier-1"))
	t.Log("applier-1 restarted")
	docker(ctx, t, "unpause", leader)
	docker(ctx, t, "network", "connect", s.Network(), lost)
	t.Logf("planner unpaused, %s reconnected", node)

	rt, err := s.WaitCondition(ctx, 15*time.Minute, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolledOut)
	if err != nil {
		t.Fatalf("not rolled out after the faults: %v", err)
	}
	t.Logf("Ready=True/RolledOut: plan %s, rollout %s", rt.Status.ActivePlan, rt.Status.Rollout)
	auditNothingLost(ctx, t, s)
}

// waitSteps waits until the current rollout has at least n steps succeeded, and returns how many.
func waitSteps(ctx context.Context, t *testing.T, s *composestack.Stack, n int32) int32 {
	t.Helper()
	var got int32
	err := testenv.WaitFor(ctx, 10*time.Minute, fmt.Sprintf("a rollout with %d steps done", n), func(ctx context.Context) (bool, error) {
		rt, err := s.Runtime(ctx)
		if err != nil || rt.Status.Rollout == "" {
			return false, nil //nolint:nilerr // not created yet
		}
		ro, err := s.Rollout(ctx, rt.Status.Rollout)
		if err != nil || ro.Status.StepCounts == nil {
			return false, nil //nolint:nilerr // not written yet
		}
		got = ro.Status.StepCounts.Succeeded
		return got >= n, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// natsNodeOf is the NATS node (nats-1, nats-2, nats-3) service's container last connected to,
// from the url of its last "nats connected" or "nats reconnected" log line (JSON, or zerolog's
// console format with its colours). A client reconnects to the URLs the cluster advertises too,
// which name a node by its address on the network: ips maps those to the node (natsAddresses).
func natsNodeOf(ctx context.Context, t *testing.T, s *composestack.Stack, service string, ips map[string]string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, "docker", "logs", container(ctx, t, s, service)).CombinedOutput()
	if err != nil {
		t.Fatalf("docker logs %s: %v", service, err)
	}
	node := ""
	for line := range strings.Lines(ansi.ReplaceAllString(string(out), "")) {
		if !strings.Contains(line, "nats connected") && !strings.Contains(line, "nats reconnected") {
			continue
		}
		m := logURL.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		u, err := url.Parse(m[1])
		if err != nil {
			t.Fatalf("%s logged a NATS url %q: %v", service, m[1], err)
		}
		node = cmp.Or(ips[u.Hostname()], u.Hostname())
	}
	if !strings.HasPrefix(node, "nats-") {
		t.Fatalf("%s logged no connection to a NATS node (last %q; the nodes' addresses %v)", service, node, ips)
	}
	return node
}

// natsAddresses maps each NATS node's address on the stack's network to its service name.
func natsAddresses(ctx context.Context, t *testing.T, s *composestack.Stack) map[string]string {
	t.Helper()
	ips := map[string]string{}
	for _, node := range []string{"nats-1", "nats-2", "nats-3"} {
		out, err := exec.CommandContext(ctx, "docker", "inspect", "--format",
			"{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", container(ctx, t, s, node)).Output()
		if err != nil {
			t.Fatalf("docker inspect %s: %v", node, err)
		}
		for _, ip := range strings.Fields(string(out)) {
			ips[ip] = node
		}
	}
	return ips
}

var (
	ansi   = regexp.MustCompile("\x1b\\[[0-9;]*m")
	logURL = regexp.MustCompile(`(?:\burl=|"url":")([a-z]+://[^\s"]+)`)
)

// plannerLeader is the container of the planner holding the planner's Lease (its identity is
// the container's host name).
func plannerLeader(ctx context.Context, t *testing.T, s *composestack.Stack) string {
	t.Helper()
	lease, err := s.Kube.CoordinationV1().Leases(stack.OperatorNamespace).Get(ctx, v1alpha1.LeaseName(v1alpha1.BinaryPlanner), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the planner's Lease: %v", err)
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	id := container(ctx, t, s, "planner")
	out, err := exec.CommandContext(ctx, "docker", "inspect", "--format", "{{.Config.Hostname}}", id).Output()
	if err != nil {
		t.Fatal(err)
	}
	if host := strings.TrimSpace(string(out)); !strings.HasPrefix(holder, host) {
		t.Fatalf("the planner's Lease is held by %q, not the planner container (host name %s)", holder, host)
	}
	return id
}

// auditNothingLost checks what a lost message would leave behind: an Application missing or at
// another revision than its bundle digest, a step not succeeded, a parked message, a panic.
func auditNothingLost(ctx context.Context, t *testing.T, s *composestack.Stack) {
	t.Helper()
	rt, err := s.Runtime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := s.Rollout(ctx, rt.Status.Rollout)
	if err != nil {
		t.Fatal(err)
	}
	if c := ro.Status.StepCounts; c == nil || c.Succeeded != c.Total || c.Total == 0 {
		t.Errorf("rollout %s: step counts %+v, want every step succeeded", ro.Name, c)
	}
	for _, c := range stack.ExampleComponents() {
		app, err := s.Dynamic.Resource(testenv.ApplicationGVR).Namespace(stack.EngineNamespace).Get(ctx, c.Name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("component %s: its Application: %v", c.Name, err)
			continue
		}
		rev, _, _ := unstructured.NestedString(app.Object, "spec", "source", "targetRevision")
		if want := s.Digests[c.Name]; rev != want {
			t.Errorf("component %s: Application at %q, want the bundle's digest %s", c.Name, rev, want)
		}
	}
	parked := parkedMessages(ctx, t, s)
	if parked != 0 {
		t.Errorf("%d messages parked on %s after the faults", parked, bus.StreamParked)
	}
	out, err := exec.CommandContext(ctx, "docker", "ps", "-aq", "--filter", "label=com.docker.compose.project="+project).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range strings.Fields(string(out)) {
		logs, _ := exec.CommandContext(ctx, "docker", "logs", id).CombinedOutput()
		if strings.Contains(string(logs), "panic:") || strings.Contains(string(logs), "DATA RACE") {
			t.Errorf("container %s logged a panic or a race:\n%s", id, logs)
		}
	}
}

// parkedMessages counts the messages of the parked stream, read as the observer through
// nats-1's published port.
func parkedMessages(ctx context.Context, t *testing.T, s *composestack.Stack) uint64 {
	t.Helper()
	addr, err := s.PublishedPort(ctx, "nats-1", 4222)
	if err != nil {
		t.Fatal(err)
	}
	password, err := s.ReadFile(ctx, "nats-1", "/secrets/observer-password")
	if err != nil {
		t.Fatal(err)
	}
	ca, err := s.ReadFile(ctx, "nats-1", "/secrets/nats-ca.crt")
	if err != nil {
		t.Fatal(err)
	}
	caFile := t.TempDir() + "/ca.crt"
	if err := os.WriteFile(caFile, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect("tls://"+addr, nats.UserInfo("observer", string(password)), nats.RootCAs(caFile))
	if err != nil {
		t.Fatalf("connect to nats-1 as the observer: %v", err)
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	info, err := js.StreamInfo(bus.StreamParked, nats.Context(ctx))
	if err != nil {
		t.Fatalf("stream %s: %v", bus.StreamParked, err)
	}
	return info.State.Msgs
}

func container(ctx context.Context, t *testing.T, s *composestack.Stack, service string) string {
	t.Helper()
	id, err := s.Container(ctx, service)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func docker(ctx context.Context, t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput(); err != nil {
		t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// testWriter sends progress lines to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
