//go:build integration

package security

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// violationTimeout bounds the server's permissions-violation notice after a flush.
const violationTimeout = 10 * time.Second

// connectTimeout bounds a connection's handshake, bcrypt password check included.
const connectTimeout = time.Minute

// identity is one NATS connection as one binary's user.
type identity struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	errs chan error
}

func connectAs(t *testing.T, c *chartNATS, user string) *identity {
	t.Helper()
	errs := make(chan error, 64)
	// The chart stores bcrypt hashes: checking a password takes a while on a loaded machine, and
	// a handshake that outlasts the server's first PING fails; try again until connectTimeout.
	var nc *nats.Conn
	err := testenv.WaitFor(t.Context(), connectTimeout, "connect as "+user, func(context.Context) (bool, error) {
		var err error
		nc, err = nats.Connect(c.URL, nats.UserInfo(user, c.passwords[user]), nats.Name("security-test-"+user), nats.Timeout(connectTimeout),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
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
	return &identity{nc: nc, js: js, errs: errs}
}

// expectViolation waits for the server's permissions violation naming subject.
func (id *identity) expectViolation(t *testing.T, what, subject string) {
	t.Helper()
	if err := id.nc.FlushTimeout(violationTimeout); err != nil {
		t.Fatalf("flush: %v", err)
	}
	timer := time.NewTimer(violationTimeout)
	defer timer.Stop()
	for {
		select {
		case err := <-id.errs:
			msg := strings.ToLower(err.Error())
			if strings.Contains(msg, "permissions violation") && strings.Contains(msg, strings.ToLower(what)) && strings.Contains(err.Error(), subject) {
				return
			}
		case <-timer.C:
			t.Fatalf("no permissions violation for %s %q within %s", what, subject, violationTimeout)
		}
	}
}

// TestChartIdentitiesPublishAndSubscribeOnlyTheirOwn runs the chart's NATS authorization: the
// applier's identity cannot publish a readiness verdict, a drift event or a command, nor
// subscribe to the bus's subjects; the webhook's identity cannot publish anything but audit
// events. A refused publish never reaches a stream; an allowed one is stored.
func TestChartIdentitiesPublishAndSubscribeOnlyTheirOwn(t *testing.T) {
	c := startChartNATS(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	planner := connectAs(t, c, "planner")
	if err := dispatch.EnsureStreams(ctx, planner.js, 1); err != nil {
		t.Fatalf("the planner's identity declares the streams: %v", err)
	}
	ids := map[string]*identity{"applier": connectAs(t, c, "applier"), "admission": connectAs(t, c, "admission")}

	cases := map[string]struct {
		user    string
		subject string
		allowed bool
	}{
		"the applier publishes an apply result":           {user: "applier", subject: bus.AppliedSubject("cluster", "gpu-operator"), allowed: true},
		"the applier cannot publish a readiness verdict":  {user: "applier", subject: bus.VerdictSubject("cluster", "gpu-operator")},
		"the applier cannot publish a drift event":        {user: "applier", subject: bus.DriftSubject("cluster", "gpu-operator")},
		"the applier cannot publish an apply command":     {user: "applier", subject: bus.ApplySubject("cluster", "gpu-operator")},
		"the applier cannot publish a remove command":     {user: "applier", subject: bus.RemoveSubject("cluster", "gpu-operator")},
		"the applier cannot publish the engine state":     {user: "applier", subject: bus.SubjectEngine},
		"the applier cannot publish credentials":          {user: "applier", subject: bus.SubjectCredentials},
		"the applier cannot publish an audit event":       {user: "applier", subject: bus.SubjectAudit},
		"the webhook publishes an audit event":            {user: "admission", subject: bus.SubjectAudit, allowed: true},
		"the webhook cannot publish an apply command":     {user: "admission", subject: bus.ApplySubject("cluster", "gpu-operator")},
		"the webhook cannot publish a remove command":     {user: "admission", subject: bus.RemoveSubject("cluster", "gpu-operator")},
		"the webhook cannot publish an apply result":      {user: "admission", subject: bus.AppliedSubject("cluster", "gpu-operator")},
		"the webhook cannot publish a readiness verdict":  {user: "admission", subject: bus.VerdictSubject("cluster", "gpu-operator")},
		"the webhook cannot publish a drift event":        {user: "admission", subject: bus.DriftSubject("cluster", "gpu-operator")},
		"the webhook cannot publish the engine state":     {user: "admission", subject: bus.SubjectEngine},
		"the webhook cannot publish credentials":          {user: "admission", subject: bus.SubjectCredentials},
		"the webhook cannot acknowledge a command for us": {user: "admission", subject: "$JS.ACK.AICR_COMMANDS.applier.1.1.1.1.1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			id := ids[tc.user]
			stream := bus.StreamEvents
			if strings.HasPrefix(tc.subject, bus.Prefix+".cmd.") {
				stream = bus.StreamCommands
			}
			if tc.allowed {
				if _, err := id.js.Publish(ctx, tc.subject, []byte(`{}`)); err != nil {
					t.Fatalf("%s publishes its own subject %s: %v", tc.user, tc.subject, err)
				}
				return
			}
			planted := []byte(`{"planted":"by ` + tc.user + `"}`)
			if err := id.nc.Publish(tc.subject, planted); err != nil {
				t.Fatal(err)
			}
			id.expectViolation(t, "publish", tc.subject)
			if strings.HasPrefix(tc.subject, "$JS.") {
				return
			}
			s, err := planner.js.Stream(ctx, stream)
			if err != nil {
				t.Fatal(err)
			}
			info, err := s.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
				msg, err := s.GetMsg(ctx, seq)
				if errors.Is(err, jetstream.ErrMsgNotFound) {
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if msg.Subject == tc.subject && string(msg.Data) == string(planted) {
					t.Errorf("the refused publish of %s reached stream %s (sequence %d)", tc.subject, stream, seq)
				}
			}
		})
	}

	subscribes := map[string]struct {
		user    string
		subject string
	}{
		"the applier cannot subscribe to commands": {user: "applier", subject: bus.Prefix + ".cmd.>"},
		"the applier cannot subscribe to verdicts": {user: "applier", subject: bus.Prefix + ".evt.release.>"},
		"the webhook cannot subscribe to anything": {user: "admission", subject: ">"},
	}
	for name, tc := range subscribes {
		t.Run(name, func(t *testing.T) {
			id := ids[tc.user]
			if _, err := id.nc.SubscribeSync(tc.subject); err != nil {
				t.Fatal(err)
			}
			id.expectViolation(t, "subscription", tc.subject)
		})
	}

	t.Run("a binary cannot connect with another binary's password", func(t *testing.T) {
		// A handshake that outlasts the server's first PING fails before the password is judged;
		// try again until the server's verdict comes.
		connected := false
		err := testenv.WaitFor(t.Context(), connectTimeout, "the server's authorization verdict", func(context.Context) (bool, error) {
			nc, err := nats.Connect(c.URL, nats.UserInfo("applier", c.passwords["planner"]), nats.Timeout(connectTimeout))
			if err == nil {
				nc.Close()
				connected = true
				return true, nil
			}
			if errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
				return true, nil
			}
			return false, err
		})
		if err != nil {
			t.Fatal(err)
		}
		if connected {
			t.Fatal("the applier connected with the planner's password")
		}
	})
}
