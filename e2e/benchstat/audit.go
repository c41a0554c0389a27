package benchstat

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// AuditEvent is one request in a kube-apiserver's audit log: the ResponseComplete stage of an
// event logged at level Metadata or above.
type AuditEvent struct {
	Verb, Resource, Subresource, Name, UserAgent string
	// Received is when the API server received the request; Completed, when it had answered.
	Received, Completed time.Time
}

// auditLine is what ParseAudit reads of an audit.k8s.io/v1 Event.
type auditLine struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	Received  time.Time `json:"requestReceivedTimestamp"`
	Completed time.Time `json:"stageTimestamp"`
}

// ParseAudit reads the ResponseComplete events of an audit log in the JSON format (one event a
// line), in the order the API server received them. Other stages and requests without an object
// (/metrics, /healthz) are left out; a line that is not an event is an error naming its number.
func ParseAudit(r io.Reader) ([]AuditEvent, error) {
	var out []AuditEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for n := 1; sc.Scan(); n++ {
		raw := sc.Bytes()
		if len(strings.TrimSpace(string(raw))) == 0 {
			continue
		}
		var l auditLine
		if err := json.Unmarshal(raw, &l); err != nil {
			return nil, fmt.Errorf("audit log line %d: %w", n, err)
		}
		if l.Stage != "ResponseComplete" || l.ObjectRef == nil {
			continue
		}
		out = append(out, AuditEvent{
			Verb: l.Verb, Resource: l.ObjectRef.Resource, Subresource: l.ObjectRef.Subresource, Name: l.ObjectRef.Name,
			UserAgent: l.UserAgent, Received: l.Received, Completed: l.Completed,
		})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	slices.SortStableFunc(out, func(a, b AuditEvent) int { return a.Received.Compare(b.Received) })
	return out, nil
}

// by reports whether e is a verb on resource ("runtimerollouts/status" with a subresource) by
// a client whose user agent starts with agent.
func (e *AuditEvent) by(verb, resource, agent string) bool {
	res := e.Resource
	if e.Subresource != "" {
		res += "/" + e.Subresource
	}
	return e.Verb == verb && res == resource && strings.HasPrefix(e.UserAgent, agent)
}

// AdvanceAgents are the user agents (prefixes) of the clients an advance's requests come from.
type AdvanceAgents struct {
	// Engine writes an Application's status once its sync is done (Argo CD, or the benchmark's
	// stand-in).
	Engine string
	// Planner writes the rollout's status; Applier applies the next Application.
	Planner, Applier string
}

// AdvanceSpans is one step advance as the API server saw it: from the engine's status write of
// one Application (the step ready) to its first sight of the next one's status write, cut at
// the operator's two writes in between. The API server sends a write's watch events before it
// has answered the write, so a span from one request's answer to the next one's receipt can
// be negative: the next client acted on the watch before the writer had its answer.
type AdvanceSpans struct {
	// ToRolloutWrite is the engine's write answered → the planner's rollout status write
	// received: the watch to readiness, its verdict over NATS, the planner's decision.
	ToRolloutWrite time.Duration
	// RolloutWrite is the API server's time on the rollout status write.
	RolloutWrite time.Duration
	// ToApply is the rollout write answered → the applier's apply received: the command over
	// NATS and the applier's decision, with any read it made (Reads).
	ToApply time.Duration
	// Apply is the API server's time on the apply.
	Apply time.Duration
	// ToEngine is the apply answered → the engine's status write of that Application
	// received: the watch to the engine, and the engine's own work.
	ToEngine time.Duration
	// Reads is how many GETs the applier made between the rollout write and its apply.
	Reads int
}

// Total is the advance from the engine's first write answered to its next write received.
func (s AdvanceSpans) Total() time.Duration {
	return s.ToRolloutWrite + s.RolloutWrite + s.ToApply + s.Apply + s.ToEngine
}

// Advances finds the step advances among events (in ParseAudit's order) received within
// [from, to]: each update of an Application by the engine, then the planner's next update of a
// rollout's status, then the applier's next apply (a patch) of another Application, then the
// engine's next update of that one. A step whose next write never comes (the last of a rollout)
// is no advance, and neither is one with a second rollout write before the apply (a rollout
// that ended, and the next one's start). It assumes one step in flight at a time, as in a
// rollout of parallelism 1.
func Advances(events []AuditEvent, a AdvanceAgents, from, to time.Time) []AdvanceSpans {
	var in []AuditEvent
	for _, e := range events {
		if !e.Received.Before(from) && !e.Received.After(to) {
			in = append(in, e)
		}
	}
	// next is the index of the first event from i on that match holds for, or -1.
	next := func(i int, match func(e *AuditEvent) bool) int {
		for ; i < len(in); i++ {
			if match(&in[i]) {
				return i
			}
		}
		return -1
	}
	var out []AdvanceSpans
	for i := range in {
		done := &in[i]
		if !done.by("update", "applications", a.Engine) {
			continue
		}
		w := next(i+1, func(e *AuditEvent) bool {
			return e.by("update", "runtimerollouts/status", a.Planner) && e.Received.After(done.Received)
		})
		if w < 0 {
			continue
		}
		write := &in[w]
		ap := next(w+1, func(e *AuditEvent) bool {
			return e.by("patch", "applications", a.Applier) && e.Name != done.Name && e.Received.After(write.Received)
		})
		if ap < 0 {
			continue
		}
		apply := &in[ap]
		// Another write of the engine, or of a rollout, before this apply: the step after
		// done was not this one (a rollout ended and the next one started in between).
		if next(i+1, func(e *AuditEvent) bool { return e.by("update", "applications", a.Engine) }) < ap ||
			slices.ContainsFunc(in[w+1:ap], func(e AuditEvent) bool { return e.by("update", "runtimerollouts/status", a.Planner) }) {
			continue
		}
		e := next(ap+1, func(e *AuditEvent) bool {
			return e.by("update", "applications", a.Engine) && e.Name == apply.Name && e.Received.After(apply.Received)
		})
		if e < 0 {
			continue
		}
		reads := 0
		for _, r := range in[w+1 : ap] {
			if r.Verb == "get" && strings.HasPrefix(r.UserAgent, a.Applier) {
				reads++
			}
		}
		out = append(out, AdvanceSpans{
			ToRolloutWrite: write.Received.Sub(done.Completed),
			RolloutWrite:   write.Completed.Sub(write.Received),
			ToApply:        apply.Received.Sub(write.Completed),
			Apply:          apply.Completed.Sub(apply.Received),
			ToEngine:       in[e].Received.Sub(apply.Completed),
			Reads:          reads,
		})
	}
	return out
}
