package bus

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// policy is the trust boundary in words, written apart from the table: it says which identity
// may perform op, so that a grant wider than the job (such as $JS.API.>) fails the test.
func policy(identity string, op Operation) bool {
	s := op.Subject
	if op.Access == Subscribe {
		// Only one's own inbox: nobody reads everything, the bus, advisories or another's inbox.
		return s == InboxPrefix(identity)+".x"
	}
	producers := map[string]string{
		ApplySubject("cluster", "gpu-operator"):   v1alpha1.BinaryPlanner,
		RemoveSubject("cluster", "gpu-operator"):  v1alpha1.BinaryPlanner,
		AppliedSubject("cluster", "gpu-operator"): v1alpha1.BinaryApplier,
		VerdictSubject("cluster", "gpu-operator"): v1alpha1.BinaryReadiness,
		DriftSubject("cluster", "gpu-operator"):   v1alpha1.BinaryReadiness,
		SubjectEngine:                             v1alpha1.BinaryReadiness,
		SubjectCredentials:                        v1alpha1.BinaryCredRefresher,
		SubjectAudit:                              v1alpha1.BinaryAdmission,
		// each dispatch loop parks only what its own consumer delivered
		ParkedSubject(ConsumerApplier): v1alpha1.BinaryApplier,
		ParkedSubject(ConsumerPlanner): v1alpha1.BinaryPlanner,
	}
	if p, ok := producers[s]; ok {
		return p == identity
	}
	owner := map[string]string{ConsumerApplier: v1alpha1.BinaryApplier, ConsumerPlanner: v1alpha1.BinaryPlanner}
	for _, c := range Consumers() {
		stream, cfg, _ := ConsumerConfig(c)
		switch s {
		case ConsumerCreateSubject(stream, cfg):
			return identity == StreamOwner // setup: the stream owner alone
		case ConsumerAPI("CONSUMER.MSG.NEXT", stream, c), JSAckPrefix + stream + "." + c + ".1.1.1.1700000000000000000.0":
			return identity == owner[c] // each consumer is read and acknowledged by its owner only
		}
	}
	for _, stream := range []string{StreamCommands, StreamEvents, StreamParked} {
		if s == StreamAPI("STREAM.CREATE", stream) || s == StreamAPI("STREAM.UPDATE", stream) {
			return identity == StreamOwner
		}
	}
	switch s {
	case ConsumerAPI("CONSUMER.INFO", StreamCommands, ConsumerApplier):
		return identity == v1alpha1.BinaryApplier // binds to the consumer the planner created
	case ConsumerAPI("CONSUMER.INFO", StreamEvents, ConsumerPlanner):
		return identity == v1alpha1.BinaryPlanner // its consumer's backlog, for the metrics
	case StreamAPI("STREAM.INFO", StreamEvents):
		// the publishers that do not own the stream wait for it; the planner looks it up to
		// read the newest reports; the applier publishes only results, to a stream it never
		// looks up
		return identity != v1alpha1.BinaryApplier
	case StreamAPI("STREAM.INFO", StreamParked), StreamAPI("STREAM.MSG.GET", StreamParked), StreamAPI("STREAM.MSG.DELETE", StreamParked):
		// the planner shows the parked messages on the runtime, retries them when asked, and
		// removes each it sent back; nobody else reads or changes the parked stream
		return identity == v1alpha1.BinaryPlanner
	case StreamAPI("STREAM.MSG.GET", StreamEvents):
		// the planner reads the newest engine and credentials reports at start: events it
		// consumes anyway
		return identity == v1alpha1.BinaryPlanner
	}
	// Everything else (delete, purge, other message reads, direct get, other consumers,
	// listing, account info) is nobody's.
	return false
}

// TestPermissionsAreTheTrustBoundary proves the table allows exactly what the policy allows,
// for every identity and every operation of the table.
func TestPermissionsAreTheTrustBoundary(t *testing.T) {
	for _, id := range v1alpha1.Binaries() {
		for _, op := range Operations() {
			if got, want := op.Allows(id), policy(id, op); got != want {
				t.Errorf("%s: %s (%s %s) allowed %v, want %v", id, op.Name, op.Access, op.Subject, got, want)
			}
		}
	}
}

// TestEveryGrantIsInTheTable proves each grant permits at least one operation of the table, so
// the table in docs/security.md shows every permission there is.
func TestEveryGrantIsInTheTable(t *testing.T) {
	for _, id := range v1alpha1.Binaries() {
		for _, g := range Permissions(id) {
			if !slices.ContainsFunc(Operations(), func(op Operation) bool {
				return op.Access == g.Access && MatchSubject(g.Subject, op.Subject)
			}) {
				t.Errorf("%s's grant %s %s permits no operation of the table", id, g.Access, g.Subject)
			}
			if g.Why == "" {
				t.Errorf("%s's grant %s %s says not why", id, g.Access, g.Subject)
			}
		}
	}
	if Permissions("auditor") != nil {
		t.Error("an unknown identity has permissions")
	}
}

func TestMatchSubject(t *testing.T) {
	for _, tc := range []struct {
		pattern, subject string
		want             bool
	}{
		{"a.b", "a.b", true},
		{"a.b", "a.b.c", false},
		{"a.*", "a.b", true},
		{"a.*", "a.b.c", false},
		{"a.>", "a.b.c", true},
		{"a.>", "a", false},
		{">", "a", true},
		{"a.*.c", "a.b.c", true},
		{"a.*.c", "a.b.d", false},
		// a subject's ">" token is literal: the planner's consumer create subject ends in one
		{"$JS.API.CONSUMER.CREATE.S.c.aicr.v1.evt.>", "$JS.API.CONSUMER.CREATE.S.c.aicr.v1.evt.>", true},
		{"$JS.API.CONSUMER.CREATE.S.c", "$JS.API.CONSUMER.CREATE.S.c.aicr.v1.evt.>", false},
	} {
		if got := MatchSubject(tc.pattern, tc.subject); got != tc.want {
			t.Errorf("MatchSubject(%q, %q) = %v, want %v", tc.pattern, tc.subject, got, tc.want)
		}
	}
}

// TestConsumerCreateSubject proves the subject follows the consumer's filter: a single filter
// subject is part of it (the planner's), a filter list is not (the applier's).
func TestConsumerCreateSubject(t *testing.T) {
	stream, cfg, _ := ConsumerConfig(ConsumerPlanner)
	if got, want := ConsumerCreateSubject(stream, cfg), "$JS.API.CONSUMER.CREATE.AICR_EVENTS.planner.aicr.v1.evt.>"; got != want {
		t.Errorf("planner: %s, want %s", got, want)
	}
	stream, cfg, _ = ConsumerConfig(ConsumerApplier)
	if got, want := ConsumerCreateSubject(stream, cfg), "$JS.API.CONSUMER.CREATE.AICR_COMMANDS.applier"; got != want {
		t.Errorf("applier: %s, want %s", got, want)
	}
}

// TestPermissionsJSON proves the chart's file is nats-server's permissions format, one entry per
// identity, each subscribing to its own inbox only.
func TestPermissionsJSON(t *testing.T) {
	var got map[string]NATSPermissions
	if err := json.Unmarshal(PermissionsJSON(), &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(slices.Sorted(slices.Values(v1alpha1.Binaries())), slices.Sorted(maps.Keys(got))); diff != "" {
		t.Errorf("identities (-want +got):\n%s", diff)
	}
	for id, p := range got {
		if diff := cmp.Diff([]string{InboxPrefix(id) + ".>"}, p.Subscribe.Allow); diff != "" {
			t.Errorf("%s subscribes (-want +got):\n%s", id, diff)
		}
		if len(p.Publish.Allow) == 0 {
			t.Errorf("%s may publish nothing", id)
		}
	}
}

func TestReplaceDocSection(t *testing.T) {
	doc := "# Security\n\nintro\n\n" + DocBegin + "\nold\n" + DocEnd + "\n\nrest\n"
	got, err := ReplaceDocSection(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "# Security\n\nintro\n\n"+DocBegin+"\n\n| Operation |") || !strings.HasSuffix(got, DocEnd+"\n\nrest\n") || strings.Contains(got, "old") {
		t.Errorf("replaced section:\n%s", got)
	}
	again, err := ReplaceDocSection(got)
	if err != nil || again != got {
		t.Errorf("replacing twice changes the document (err %v)", err)
	}
	if _, err := ReplaceDocSection("no markers"); err == nil {
		t.Error("a document without markers was accepted")
	}
}
