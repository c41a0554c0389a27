package bus

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// The trust boundary on the bus: one NATS identity per binary, named like the binary (its NATS
// user is v1alpha1's binary name), and the one
// table of what each may publish and subscribe to (the JetStream API is publishing to $JS.API.*).
// The Helm chart (files/nats-permissions.json, written by make generate), the local stack and the
// tests all take their permissions from Permissions; nothing else lists them.
//
// The planner owns stream setup: it alone creates and updates the streams and the durable
// consumers. The other binaries only bind to them: the applier to its consumer, the others to
// the events stream they publish to. Nobody may delete or purge a stream, delete a consumer,
// create any other consumer, read a stream's messages directly, or read another's inbox.

// StreamOwner is the identity that creates and updates the streams and the durable consumers.
const StreamOwner = v1alpha1.BinaryPlanner

// JetStream API and acknowledgement subjects (nats-server's jetstream_api.go).
const (
	// JSAPIPrefix is the root of every JetStream API request subject.
	JSAPIPrefix = "$JS.API."
	// JSAckPrefix is the root of acknowledgement subjects: $JS.ACK.<stream>.<consumer>.<delivery
	// count>.<stream seq>.<consumer seq>.<time>.<pending>.
	JSAckPrefix = "$JS.ACK."
)

// InboxPrefix is the reply-inbox prefix of an identity (nats.CustomInboxPrefix): API responses,
// publish acknowledgements and fetched messages arrive under it, and each identity may subscribe
// to its own inbox only.
func InboxPrefix(identity string) string { return "_INBOX." + identity }

// Access says whether a grant or an operation publishes or subscribes.
type Access string

// The two kinds of access.
const (
	Publish   Access = "publish"
	Subscribe Access = "subscribe"
)

// Grant is one line of the table: an identity may publish or subscribe to Subject (a subject or
// a NATS wildcard pattern), because of the call Why names.
type Grant struct {
	Access  Access
	Subject string
	Why     string
}

// StreamAPI is the subject of a JetStream API call on a stream, such as
// StreamAPI("STREAM.CREATE", StreamCommands).
func StreamAPI(op, stream string) string { return JSAPIPrefix + op + "." + stream }

// ConsumerAPI is the subject of a JetStream API call on a durable consumer, such as
// ConsumerAPI("CONSUMER.MSG.NEXT", StreamCommands, ConsumerApplier).
func ConsumerAPI(op, stream, consumer string) string {
	return JSAPIPrefix + op + "." + stream + "." + consumer
}

// ConsumerCreateSubject is the subject jetstream.CreateOrUpdateConsumer sends cfg to: with a
// single FilterSubject the filter is part of the subject.
func ConsumerCreateSubject(stream string, cfg jetstream.ConsumerConfig) string {
	s := ConsumerAPI("CONSUMER.CREATE", stream, cmp.Or(cfg.Name, cfg.Durable))
	if cfg.FilterSubject != "" && len(cfg.FilterSubjects) == 0 {
		s += "." + cfg.FilterSubject
	}
	return s
}

// AckSubjects matches the acknowledgements (ack, nak, term, in progress) of a durable consumer.
func AckSubjects(stream, consumer string) string {
	return JSAckPrefix + stream + "." + consumer + ".>"
}

// Consumers returns the durable consumers: each one's owner fetches from it and acknowledges.
func Consumers() []string { return []string{ConsumerApplier, ConsumerPlanner} }

// Permissions returns the grants of identity, nil for an unknown one.
func Permissions(identity string) []Grant {
	inbox := Grant{Subscribe, InboxPrefix(identity) + ".>", "its own reply inbox: API responses, publish acknowledgements, fetched messages"}
	consume := func(consumer string) []Grant {
		stream, _, _ := ConsumerConfig(consumer)
		return []Grant{
			{Publish, ConsumerAPI("CONSUMER.MSG.NEXT", stream, consumer), "fetch from its durable consumer " + consumer},
			{Publish, AckSubjects(stream, consumer), "acknowledge what it fetched (ack, delayed nak, term)"},
		}
	}
	bindEvents := Grant{Publish, StreamAPI("STREAM.INFO", StreamEvents), "wait for the events stream before publishing"}
	var g []Grant
	switch identity {
	case v1alpha1.BinaryPlanner:
		g = append(g, Grant{Publish, SubjectCommands, "send apply and remove commands"})
		for _, s := range StreamConfigs(1) {
			g = append(g,
				Grant{Publish, StreamAPI("STREAM.CREATE", s.Name), "create stream " + s.Name + " (it owns stream setup)"},
				Grant{Publish, StreamAPI("STREAM.UPDATE", s.Name), "update stream " + s.Name + "'s configuration on upgrade"})
		}
		for _, c := range Consumers() {
			stream, cfg, _ := ConsumerConfig(c)
			g = append(g, Grant{Publish, ConsumerCreateSubject(stream, cfg), "create or update the durable consumer " + c})
		}
		g = append(g, Grant{Publish, ConsumerAPI("CONSUMER.INFO", StreamEvents, ConsumerPlanner),
			"read its durable consumer's backlog (the aicr_bus_consumer_* metrics)"},
			Grant{Publish, StreamAPI("STREAM.INFO", StreamEvents), "look up the events stream to read its newest reports"},
			Grant{Publish, StreamAPI("STREAM.MSG.GET", StreamEvents), "read the newest engine and credentials reports at start (its consumer acknowledged them before a restart)"},
			Grant{Publish, ParkedSubject(ConsumerPlanner), "park an event its handler kept failing on"},
			Grant{Publish, StreamAPI("STREAM.INFO", StreamParked), "count the parked messages (the MessagesParked condition)"},
			Grant{Publish, StreamAPI("STREAM.MSG.GET", StreamParked), "read the parked messages, to show them and to retry them"},
			Grant{Publish, StreamAPI("STREAM.MSG.DELETE", StreamParked), "remove a parked message once it was retried"})
		g = append(g, consume(ConsumerPlanner)...)
	case v1alpha1.BinaryApplier:
		g = append(g,
			Grant{Publish, SubjectAppliedPattern, "publish apply results"},
			Grant{Publish, ParkedSubject(ConsumerApplier), "park a command its handler kept failing on"},
			Grant{Publish, ConsumerAPI("CONSUMER.INFO", StreamCommands, ConsumerApplier), "bind to its durable consumer"})
		g = append(g, consume(ConsumerApplier)...)
	case v1alpha1.BinaryReadiness:
		g = append(g,
			Grant{Publish, SubjectVerdictPattern, "publish readiness verdicts"},
			Grant{Publish, SubjectDriftPattern, "publish drift and deletion reports"},
			Grant{Publish, SubjectEngine, "publish whether Argo CD is present"},
			bindEvents)
	case v1alpha1.BinaryCredRefresher:
		g = append(g, Grant{Publish, SubjectCredentials, "publish the registry credentials' state"}, bindEvents)
	case v1alpha1.BinaryAdmission:
		g = append(g, Grant{Publish, SubjectAudit, "publish each denial for audit"}, bindEvents)
	default:
		return nil
	}
	return append(g, inbox)
}

// Allowed reports whether identity may perform access on subject under its grants.
func Allowed(identity string, access Access, subject string) bool {
	for _, g := range Permissions(identity) {
		if g.Access == access && MatchSubject(g.Subject, subject) {
			return true
		}
	}
	return false
}

// MatchSubject reports whether subject falls under pattern, with NATS wildcards: "*" matches
// one token, a final ">" one or more. Tokens of subject are taken literally.
func MatchSubject(pattern, subject string) bool {
	p, s := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, tok := range p {
		switch {
		case tok == ">" && i == len(p)-1:
			return len(s) > i
		case i >= len(s):
			return false
		case tok != "*" && tok != s[i]:
			return false
		}
	}
	return len(p) == len(s)
}

// NATSPermissions is one identity's permissions in nats-server's configuration format
// (authorization.users[].permissions).
type NATSPermissions struct {
	Publish   SubjectList `json:"publish"`
	Subscribe SubjectList `json:"subscribe"`
}

// SubjectList is an allow list of subjects.
type SubjectList struct {
	Allow []string `json:"allow"`
}

// ServerPermissions returns every identity's permissions in nats-server's format.
func ServerPermissions() map[string]NATSPermissions {
	out := map[string]NATSPermissions{}
	for _, id := range v1alpha1.Binaries() {
		var p NATSPermissions
		for _, g := range Permissions(id) {
			if g.Access == Publish {
				p.Publish.Allow = append(p.Publish.Allow, g.Subject)
			} else {
				p.Subscribe.Allow = append(p.Subscribe.Allow, g.Subject)
			}
		}
		out[id] = p
	}
	return out
}

// PermissionsJSON is ServerPermissions as the chart's files/nats-permissions.json: indented, keys
// sorted, ending in a newline.
func PermissionsJSON() []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // ">" stays readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(ServerPermissions()); err != nil {
		panic(fmt.Sprintf("encode nats permissions: %v", err)) // plain strings: cannot fail
	}
	return b.Bytes()
}

// Operation is one thing a connection can try on the bus, with a concrete subject: the rows of
// the identity × operation table in docs/security.md, and what the permission tests try as every
// identity.
type Operation struct {
	// Group is the table section: "stream API", "consumer API", ...
	Group string
	// Name says what the operation does.
	Name    string
	Access  Access
	Subject string
}

// Operations returns every operation the table covers: each JetStream API call on each stream
// and consumer (and on a consumer nobody owns), acknowledgements, each bus subject, and
// subscriptions to everything, to the bus, and to each identity's inbox.
func Operations() []Operation {
	var ops []Operation
	add := func(group, name string, access Access, subject string) {
		ops = append(ops, Operation{Group: group, Name: name, Access: access, Subject: subject})
	}
	lastOf := map[string]string{StreamCommands: ApplySubject("cluster", "gpu-operator"), StreamEvents: AppliedSubject("cluster", "gpu-operator"),
		StreamParked: ParkedSubject(ConsumerApplier)}
	for _, s := range StreamConfigs(1) {
		for _, op := range []struct{ api, name string }{
			{"STREAM.CREATE", "create stream %s"}, {"STREAM.UPDATE", "update stream %s"}, {"STREAM.DELETE", "delete stream %s"},
			{"STREAM.PURGE", "purge stream %s"}, {"STREAM.INFO", "stream %s's info"}, {"STREAM.MSG.GET", "get a message of %s"},
			{"STREAM.MSG.DELETE", "delete a message of %s"}, {"DIRECT.GET", "direct get from %s"},
			{"STREAM.SNAPSHOT", "snapshot %s"}, {"CONSUMER.LIST", "list the consumers of %s"}, {"CONSUMER.NAMES", "the consumer names of %s"},
		} {
			add("stream API", fmt.Sprintf(op.name, s.Name), Publish, StreamAPI(op.api, s.Name))
		}
		add("stream API", "direct get the last message of a subject from "+s.Name, Publish, StreamAPI("DIRECT.GET", s.Name)+"."+lastOf[s.Name])
	}
	add("stream API", "stream names", Publish, JSAPIPrefix+"STREAM.NAMES")
	add("stream API", "stream list", Publish, JSAPIPrefix+"STREAM.LIST")
	add("stream API", "account info", Publish, JSAPIPrefix+"INFO")
	for _, c := range Consumers() {
		stream, cfg, _ := ConsumerConfig(c)
		what := "consumer " + c + " on " + stream
		add("consumer API", "create or update "+what, Publish, ConsumerCreateSubject(stream, cfg))
		add("consumer API", "create "+what+" (legacy durable API)", Publish, ConsumerAPI("CONSUMER.DURABLE.CREATE", stream, c))
		add("consumer API", "delete "+what, Publish, ConsumerAPI("CONSUMER.DELETE", stream, c))
		add("consumer API", "info of "+what+" (bind)", Publish, ConsumerAPI("CONSUMER.INFO", stream, c))
		add("consumer API", "fetch from "+what+" (MSG.NEXT)", Publish, ConsumerAPI("CONSUMER.MSG.NEXT", stream, c))
		add("consumer API", "pause "+what, Publish, ConsumerAPI("CONSUMER.PAUSE", stream, c))
		add("acknowledgements", "acknowledge a message of "+what, Publish, JSAckPrefix+stream+"."+c+".1.1.1.1700000000000000000.0")
	}
	for _, s := range []string{StreamCommands, StreamEvents} {
		add("consumer API", "create another consumer on "+s, Publish, ConsumerAPI("CONSUMER.CREATE", s, "other"))
		add("consumer API", "create an ephemeral consumer on "+s, Publish, JSAPIPrefix+"CONSUMER.CREATE."+s)
	}
	for _, p := range []struct{ name, subject string }{
		{"an apply command", ApplySubject("cluster", "gpu-operator")},
		{"a remove command", RemoveSubject("cluster", "gpu-operator")},
		{"an apply result", AppliedSubject("cluster", "gpu-operator")},
		{"a readiness verdict", VerdictSubject("cluster", "gpu-operator")},
		{"a drift report", DriftSubject("cluster", "gpu-operator")},
		{"the engine state", SubjectEngine},
		{"the credentials state", SubjectCredentials},
		{"an audit record", SubjectAudit},
		{"a parked command", ParkedSubject(ConsumerApplier)},
		{"a parked event", ParkedSubject(ConsumerPlanner)},
	} {
		add("bus subjects", "publish "+p.name, Publish, p.subject)
	}
	add("subscriptions", "subscribe to everything (>)", Subscribe, ">")
	add("subscriptions", "subscribe to the bus ("+Prefix+".>)", Subscribe, Prefix+".>")
	add("subscriptions", "subscribe to JetStream advisories ($JS.EVENT.>)", Subscribe, "$JS.EVENT.>")
	add("subscriptions", "subscribe to every inbox (_INBOX.>)", Subscribe, "_INBOX.>")
	for _, id := range v1alpha1.Binaries() {
		add("subscriptions", "subscribe to the "+id+"'s inbox", Subscribe, InboxPrefix(id)+".x")
	}
	order := []string{"stream API", "consumer API", "acknowledgements", "bus subjects", "subscriptions"}
	slices.SortStableFunc(ops, func(a, b Operation) int { return slices.Index(order, a.Group) - slices.Index(order, b.Group) })
	return ops
}

// Allows reports whether identity may perform op.
func (op Operation) Allows(identity string) bool { return Allowed(identity, op.Access, op.Subject) }

// PermissionsTable is the identity × operation table of docs/security.md, in Markdown.
func PermissionsTable() string {
	var b strings.Builder
	ids := v1alpha1.Binaries()
	b.WriteString("| Operation | Subject |")
	for _, id := range ids {
		b.WriteString(" " + id + " |")
	}
	b.WriteString("\n| --- | --- |" + strings.Repeat(" :-: |", len(ids)) + "\n")
	group := ""
	for _, op := range Operations() {
		if op.Group != group {
			group = op.Group
			b.WriteString("| **" + group + "** | |" + strings.Repeat(" |", len(ids)) + "\n")
		}
		b.WriteString("| " + op.Name + " | `" + op.Subject + "` |")
		for _, id := range ids {
			if op.Allows(id) {
				b.WriteString(" yes |")
			} else {
				b.WriteString(" — |")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// GrantsTable is every identity's grants with their reasons, in Markdown.
func GrantsTable() string {
	var b strings.Builder
	b.WriteString("| Identity | May | Subject | Because it must |\n| --- | --- | --- | --- |\n")
	for _, id := range v1alpha1.Binaries() {
		for _, g := range Permissions(id) {
			fmt.Fprintf(&b, "| %s | %s | `%s` | %s |\n", id, g.Access, g.Subject, g.Why)
		}
	}
	return b.String()
}

// Markers around the generated part of docs/security.md.
const (
	DocBegin = "<!-- BEGIN generated by make generate from shared/bus/permissions.go -->"
	DocEnd   = "<!-- END generated -->"
)

// ReplaceDocSection returns doc with the text between DocBegin and DocEnd replaced by the two
// tables; it fails when the markers are missing.
func ReplaceDocSection(doc string) (string, error) {
	i, j := strings.Index(doc, DocBegin), strings.Index(doc, DocEnd)
	if i < 0 || j < i {
		return "", fmt.Errorf("no %q ... %q section", DocBegin, DocEnd)
	}
	section := DocBegin + "\n\n" + PermissionsTable() + "\n" + GrantsTable() + "\n" + DocEnd
	return doc[:i] + section + doc[j+len(DocEnd):], nil
}
