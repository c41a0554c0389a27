//go:build integration

package security

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aicr-run/aicr-operator/e2e/charttest"
	"github.com/aicr-run/aicr-operator/servicekit/dispatch"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// Named timeouts.
const (
	// connectTimeout bounds a connection's handshake, the TLS handshake and the bcrypt password
	// check included: slow on a loaded machine.
	connectTimeout = time.Minute
	// answerTimeout bounds the server's answer to one request, or its refusal notice.
	answerTimeout = 10 * time.Second
)

// sentinel is a subject no identity may publish: its refusal marks the end of what the server
// said about the operation before it (the server answers a connection's messages in order).
const sentinel = "aicr.test.sentinel"

// identity is one NATS connection as one binary's user, collecting the server's asynchronous
// errors (permissions violations) in order.
type identity struct {
	name string
	nc   *nats.Conn
	js   jetstream.JetStream
	errs chan error
}

func connectAs(t *testing.T, n *charttest.NATS, user string) *identity {
	t.Helper()
	errs := make(chan error, 256)
	opts := append(n.ClientOptions(t, user), nats.Timeout(connectTimeout),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	// A handshake that outlasts the server's first PING on a loaded machine fails; the binaries
	// retry forever, so the test retries until connectTimeout.
	var nc *nats.Conn
	err := testenv.WaitFor(t.Context(), connectTimeout, "connect as "+user, func(context.Context) (bool, error) {
		var err error
		nc, err = nats.Connect(n.URL, opts...)
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
	return &identity{name: user, nc: nc, js: js, errs: errs}
}

// refusals returns every error the server reported since the last call, up to the refusal of
// the sentinel it then publishes.
func (id *identity) refusals(t *testing.T) []string {
	t.Helper()
	if err := id.nc.Publish(sentinel, nil); err != nil {
		t.Fatal(err)
	}
	if err := id.nc.FlushTimeout(answerTimeout); err != nil {
		t.Fatalf("flush: %v", err)
	}
	var got []string
	timer := time.NewTimer(answerTimeout)
	defer timer.Stop()
	for {
		select {
		case err := <-id.errs:
			if strings.Contains(err.Error(), `"`+sentinel+`"`) {
				return got
			}
			got = append(got, err.Error())
		case <-timer.C:
			t.Fatalf("the server never refused the sentinel publish of %s; reported so far: %q", id.name, got)
			return nil
		}
	}
}

// refusal is the server's notice for a refused publish or subscription of subject.
func refusal(access bus.Access, subject string) string {
	what := "Publish to"
	if access == bus.Subscribe {
		what = "Subscription to"
	}
	return fmt.Sprintf("nats: permissions violation: Permissions Violation for %s %q", what, subject)
}

// TestEveryIdentityMayDoExactlyItsOperations runs the chart's NATS (its nats.conf, TLS and
// passwords, in the real nats-server) and tries every operation of the bus's table as every
// identity: each JetStream API call on each stream and consumer (create, update, delete, purge,
// info, message get, direct get, consumer create, delete, info, list, MSG.NEXT, pause),
// acknowledgements, publishing each bus subject, subscribing to everything, to the bus and to
// each inbox. What the table allows works (the API answers, a publish is stored, a subscription
// stands) with no refusal; everything else gets the refusal for exactly that subject and, for a
// bus subject, never reaches a stream.
func TestEveryIdentityMayDoExactlyItsOperations(t *testing.T) {
	n := charttest.StartNATS(t, charttest.NATSOptions{})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	ids := map[string]*identity{}
	for _, user := range v1alpha1.Binaries() {
		ids[user] = connectAs(t, n, user)
	}
	// The planner owns stream setup: its identity declares both streams and both consumers.
	if _, err := dispatch.EnsureSetup(ctx, ids[bus.StreamOwner].js, 1); err != nil {
		t.Fatalf("the %s's stream setup: %v", bus.StreamOwner, err)
	}
	for _, id := range ids {
		if got := id.refusals(t); len(got) > 0 {
			t.Fatalf("%s was refused something while connecting or setting up: %q", id.name, got)
		}
	}

	for _, user := range v1alpha1.Binaries() {
		id := ids[user]
		t.Run(user, func(t *testing.T) {
			for _, op := range bus.Operations() {
				allowed := op.Allows(user)
				stream := ""
				if op.Access == bus.Publish && strings.HasPrefix(op.Subject, bus.Prefix+".") {
					stream = bus.StreamEvents
					if bus.MatchSubject(bus.SubjectCommands, op.Subject) {
						stream = bus.StreamCommands
					}
				}
				before := uint64(0)
				if stream != "" {
					before = n.LastSeq(t, stream)
				}
				answered := try(t, id, op, allowed)
				got := id.refusals(t)
				switch {
				case allowed && len(got) > 0:
					t.Errorf("%s may %s (%s %s) but was refused: %q", user, op.Name, op.Access, op.Subject, got)
				case allowed && !answered:
					t.Errorf("%s may %s (%s %s) but it did not work", user, op.Name, op.Access, op.Subject)
				case !allowed && (len(got) != 1 || got[0] != refusal(op.Access, op.Subject)):
					t.Errorf("%s must not %s (%s %s): the server said %q, want exactly %q", user, op.Name, op.Access, op.Subject, got, refusal(op.Access, op.Subject))
				case !allowed && stream != "" && n.LastSeq(t, stream) != before:
					t.Errorf("%s's refused publish of %s reached stream %s (last sequence %d, was %d)", user, op.Subject, stream, n.LastSeq(t, stream), before)
				}
			}
		})
	}
}

// try performs op as id; for an allowed operation it reports whether it worked: the JetStream
// API answered, JetStream stored the publish, the subscription stands.
func try(t *testing.T, id *identity, op bus.Operation, allowed bool) bool {
	t.Helper()
	switch {
	case op.Access == bus.Subscribe:
		sub, err := id.nc.SubscribeSync(op.Subject)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
		return sub.IsValid()
	case strings.HasPrefix(op.Subject, bus.JSAPIPrefix):
		body := []byte(`{}`)
		if strings.Contains(op.Subject, ".MSG.NEXT.") {
			body = []byte(`{"batch":1,"no_wait":true}`) // answered at once, message or not
		}
		if !allowed {
			if err := id.nc.PublishRequest(op.Subject, id.nc.NewInbox(), body); err != nil {
				t.Fatal(err)
			}
			return false // refused: there is no answer to wait for
		}
		msg, err := id.nc.Request(op.Subject, body, answerTimeout)
		if err != nil {
			t.Errorf("%s: no answer to %s: %v", id.name, op.Subject, err)
			return false
		}
		return len(msg.Data) > 0 || msg.Header.Get("Status") != ""
	case strings.HasPrefix(op.Subject, bus.JSAckPrefix):
		if err := id.nc.Publish(op.Subject, []byte("+ACK")); err != nil {
			t.Fatal(err)
		}
		return true // an acknowledgement has no answer: working means not refused
	default:
		if !allowed {
			if err := id.nc.Publish(op.Subject, []byte(`{"planted":"by `+id.name+`"}`)); err != nil {
				t.Fatal(err)
			}
			return false
		}
		ctx, cancel := context.WithTimeout(t.Context(), answerTimeout)
		defer cancel()
		ack, err := id.js.Publish(ctx, op.Subject, []byte(`{}`))
		if err != nil {
			t.Errorf("%s: publish %s: %v", id.name, op.Subject, err)
			return false
		}
		return ack.Sequence > 0
	}
}

// TestChartNATSRequiresTLS proves the chart's NATS speaks TLS only, with the certificate the
// chart's setup Job made for its Service: a verified TLS client names it, a client that does not
// trust it is refused, and a plain client gets nothing through.
func TestChartNATSRequiresTLS(t *testing.T) {
	n := charttest.StartNATS(t, charttest.NATSOptions{})

	t.Run("the certificate is the CA's, for the Service and every server of the cluster", func(t *testing.T) {
		tlsData := n.Secrets[charttest.Release+"-nats-tls"] // what the chart's setup Job made
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(tlsData["ca.crt"]) {
			t.Fatal("ca.crt holds no certificate")
		}
		block, _ := pem.Decode(tlsData["tls.crt"])
		if block == nil {
			t.Fatal("tls.crt holds no PEM block")
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{
			charttest.Release + "-nats." + charttest.Namespace + ".svc",
			charttest.Release + "-nats." + charttest.Namespace + ".svc.cluster.local",
			charttest.Release + "-nats-2." + charttest.Release + "-nats-headless." + charttest.Namespace + ".svc.cluster.local",
		} {
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Errorf("the certificate does not verify for %s: %v", name, err)
			}
		}
	})

	t.Run("a client trusting the chart's CA connects over TLS", func(t *testing.T) {
		id := connectAs(t, n, v1alpha1.BinaryReadiness)
		if _, err := id.nc.TLSConnectionState(); err != nil {
			t.Errorf("not a TLS connection: %v", err)
		}
	})

	t.Run("a client that does not trust the certificate is refused", func(t *testing.T) {
		_, err := nats.Connect(n.URL, nats.UserInfo(v1alpha1.BinaryReadiness, n.Passwords[v1alpha1.BinaryReadiness]), nats.Timeout(connectTimeout),
			nats.Secure(&tls.Config{ServerName: n.ServerName, MinVersion: tls.VersionTLS12})) // the system's roots
		var unknown x509.UnknownAuthorityError
		if !errors.As(err, &unknown) {
			t.Errorf("connect without the CA = %v, want an unknown-authority error", err)
		}
	})

	t.Run("a plain client gets nothing through", func(t *testing.T) {
		u, err := url.Parse(n.URL)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := net.DialTimeout("tcp", u.Host, answerTimeout)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(answerTimeout))
		r := bufio.NewReader(conn)
		info, err := r.ReadString('\n')
		if err != nil || !strings.Contains(info, `"tls_required":true`) {
			t.Fatalf("greeting %q (%v): TLS is not required", info, err)
		}
		before := n.LastSeq(t, bus.StreamEvents)
		connect := fmt.Sprintf(`{"user":%q,"pass":%q,"verbose":false}`, v1alpha1.BinaryReadiness, n.Passwords[v1alpha1.BinaryReadiness])
		if _, err := conn.Write([]byte("CONNECT " + connect + "\r\nPUB aicr.v1.evt.engine 2\r\n{}\r\nPING\r\n")); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadString('\n')
		var nerr net.Error
		switch {
		case err == nil:
			t.Errorf("the server answered a plain client: %q", line)
		case errors.As(err, &nerr) && nerr.Timeout():
			t.Errorf("the server kept a plain connection open until the deadline")
		}
		if after := n.LastSeq(t, bus.StreamEvents); after != before {
			t.Errorf("the plain client's publish was stored (last sequence %d, was %d)", after, before)
		}
	})
}
