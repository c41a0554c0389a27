package benchstat

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

var agents = AdvanceAgents{Engine: "engine", Planner: "aicr-operator/planner", Applier: "aicr-operator/applier"}

// t0 is the start of every fixture's timeline.
var t0 = time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)

// req is a request of a fixture: at and took in milliseconds from t0.
type req struct {
	verb, resource, name, agent string
	at, took                    float64
}

// auditLog renders reqs as an audit log, in the order given, each as its ResponseComplete event.
func auditLog(t *testing.T, reqs ...req) string {
	t.Helper()
	var b strings.Builder
	for _, r := range reqs {
		res, sub, _ := strings.Cut(r.resource, "/")
		ms := func(x float64) string {
			return t0.Add(time.Duration(x * float64(time.Millisecond))).Format(time.RFC3339Nano)
		}
		line, err := json.Marshal(map[string]any{
			"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "stage": "ResponseComplete",
			"verb": r.verb, "userAgent": r.agent,
			"objectRef":                map[string]string{"resource": res, "subresource": sub, "name": r.name},
			"requestReceivedTimestamp": ms(r.at), "stageTimestamp": ms(r.at + r.took),
		})
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

func parse(t *testing.T, log string) []AuditEvent {
	t.Helper()
	events, err := ParseAudit(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	return events
}

func msDur(x float64) time.Duration { return time.Duration(x * float64(time.Millisecond)) }

func TestAdvancesSplitsEachStepAdvanceAtTheOperatorsWrites(t *testing.T) {
	log := auditLog(t,
		req{"update", "applications", "svc-00", "engine", 0, 5},
		req{"update", "runtimerollouts/status", "r-1", "aicr-operator/planner", 7, 4},
		req{"get", "applications", "svc-01", "aicr-operator/applier", 12, 2},
		req{"get", "runtimerollouts", "r-1", "aicr-operator/applier", 15, 2},
		req{"patch", "applications", "svc-01", "aicr-operator/applier", 18, 6},
		req{"create", "events", "x", "aicr-operator/planner", 19, 1},
		req{"update", "applications", "svc-01", "engine", 25.5, 5},
		req{"update", "runtimerollouts/status", "r-1", "aicr-operator/planner", 32, 3},
		req{"patch", "applications", "svc-02", "aicr-operator/applier", 36, 5},
		req{"update", "applications", "svc-02", "engine", 42, 5},
		// the last step: the rollout ends, no apply follows
		req{"update", "runtimerollouts/status", "r-1", "aicr-operator/planner", 49, 3},
		req{"update", "clusterruntimes/status", "cluster", "aicr-operator/planner", 53, 3},
	)
	got := Advances(parse(t, log), agents, t0, t0.Add(time.Second))
	want := []AdvanceSpans{
		{ToRolloutWrite: msDur(2), RolloutWrite: msDur(4), ToApply: msDur(7), Apply: msDur(6), ToEngine: msDur(1.5), Reads: 2},
		{ToRolloutWrite: msDur(1.5), RolloutWrite: msDur(3), ToApply: msDur(1), Apply: msDur(5), ToEngine: msDur(1)},
	}
	if len(got) != len(want) {
		t.Fatalf("advances: got %d %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("advance %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if tot := got[0].Total(); tot != msDur(20.5) {
		t.Errorf("first advance's total: got %v, want 20.5ms (the engine's write answered at 5 ms, its next received at 25.5 ms)", tot)
	}
}

func TestAdvancesKeepsToTheWindowAndToOneRollout(t *testing.T) {
	log := auditLog(t,
		// a rollout before the window
		req{"update", "applications", "svc-00", "engine", 0, 5},
		req{"update", "runtimerollouts/status", "r-1", "aicr-operator/planner", 6, 3},
		req{"patch", "applications", "svc-01", "aicr-operator/applier", 10, 5},
		req{"update", "applications", "svc-01", "engine", 16, 5},
		// its last step ends it; the next rollout starts with svc-00 again
		req{"update", "runtimerollouts/status", "r-1", "aicr-operator/planner", 1000, 3},
		req{"update", "runtimerollouts/status", "r-2", "aicr-operator/planner", 1010, 3},
		req{"patch", "applications", "svc-00", "aicr-operator/applier", 1014, 5},
		req{"update", "applications", "svc-00", "engine", 1020, 5},
		req{"update", "runtimerollouts/status", "r-2", "aicr-operator/planner", 1026, 3},
		req{"patch", "applications", "svc-01", "aicr-operator/applier", 1030, 5},
		req{"update", "applications", "svc-01", "engine", 1036, 5},
	)
	events := parse(t, log)
	if got := Advances(events, agents, t0.Add(500*time.Millisecond), t0.Add(2*time.Second)); len(got) != 1 || got[0].ToRolloutWrite != msDur(1) {
		t.Errorf("second rollout alone: got %+v, want its one advance (svc-00 → svc-01, the rollout write 1 ms after the engine's)", got)
	}
	if got := Advances(events, agents, t0, t0.Add(500*time.Millisecond)); len(got) != 1 || got[0].ToRolloutWrite != msDur(1) || got[0].Apply != msDur(5) {
		t.Errorf("first rollout alone: got %+v, want its one advance", got)
	}
	// Both rollouts at once: the engine's last write of the first (svc-01) is followed by two
	// rollout writes (the first rollout's end, the second's start) before the next apply, so
	// it starts no advance.
	if got := Advances(events, agents, t0, t0.Add(2*time.Second)); len(got) != 2 {
		t.Errorf("both rollouts: got %d advances %+v, want 2 (svc-00 → svc-01 in each)", len(got), got)
	}
}

func TestParseAuditSortsByReceiptAndSkipsWhatIsNoRequestOnAnObject(t *testing.T) {
	log := auditLog(t,
		req{"update", "applications", "b", "engine", 10, 1},
		req{"update", "applications", "a", "engine", 5, 1},
	)
	log += `{"kind":"Event","stage":"RequestReceived","verb":"get","objectRef":{"resource":"applications","name":"c"}}` + "\n"
	log += `{"kind":"Event","stage":"ResponseComplete","verb":"get","requestURI":"/metrics"}` + "\n\n"
	events := parse(t, log)
	if len(events) != 2 || events[0].Name != "a" || events[1].Name != "b" {
		t.Fatalf("got %+v, want a then b (ordered by receipt), nothing else", events)
	}
	if e := events[0]; e.Received != t0.Add(5*time.Millisecond) || e.Completed != t0.Add(6*time.Millisecond) || e.Verb != "update" || e.UserAgent != "engine" {
		t.Errorf("event a: got %+v", e)
	}
}

func TestParseAuditNamesTheLineThatIsNoEvent(t *testing.T) {
	log := auditLog(t, req{"update", "applications", "a", "engine", 5, 1}) + "not json\n"
	_, err := ParseAudit(strings.NewReader(log))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("got %v, want an error naming line 2", err)
	}
}

func TestAdvancesCountsAWriteReceivedBeforeTheOneBeforeItWasAnswered(t *testing.T) {
	// The watch events of a write go out before its answer: the planner's write comes in
	// before the engine's write was answered, and the engine's before the apply was.
	log := auditLog(t,
		req{"update", "applications", "svc-00", "engine", 0, 5},
		req{"update", "runtimerollouts/status", "r-1", "aicr-operator/planner", 4, 4},
		req{"patch", "applications", "svc-01", "aicr-operator/applier", 9, 6},
		req{"update", "applications", "svc-01", "engine", 14, 5},
	)
	got := Advances(parse(t, log), agents, t0, t0.Add(time.Second))
	want := AdvanceSpans{ToRolloutWrite: msDur(-1), RolloutWrite: msDur(4), ToApply: msDur(1), Apply: msDur(6), ToEngine: msDur(-1)}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("got %+v, want [%+v]", got, want)
	}
}
