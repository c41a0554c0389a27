package bus

import (
	"bytes"
	"encoding/json"
	"flag"
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var (
	sentAt    = time.Date(2026, 5, 14, 9, 30, 0, 0, time.UTC)
	startedAt = time.Date(2026, 5, 14, 9, 29, 58, 0, time.UTC)
	expiresAt = time.Date(2026, 5, 14, 21, 30, 0, 0, time.UTC)
)

const planDigest = "sha256:f7bf555e994826e3c903a34921056aee4c829088bf277a390a09a8a38e135387"

func header(typ, id, source string) Header {
	return Header{Type: typ, ID: id, Time: sentAt, Source: source}
}

const runtimeUID = "6f1c2b9e-0d4a-4e59-9a53-2d7f3c1e8b10"

// sampleApply and sampleRemove are the commands as the planner builds them, stamped as the
// Publisher stamps them.
func sampleApply() *ApplyCommand {
	step := StepRef{Rollout: "cluster-7", Index: 3, ID: "cluster-7/3", Started: startedAt, Seq: "48170"}
	c := NewApplyCommand("cluster", runtimeUID, step, "gpu-operator", v1alpha1.ActionUpgrade, planDigest, true,
		&Basis{UID: "app-uid", ResourceVersion: "48160", Step: "cluster-6/2@rollout-uid"})
	c.Header = header(TypeApplyCommand, "cluster-7/3/1", "planner")
	return c
}

func sampleRemove() *RemoveCommand {
	step := StepRef{Rollout: "cluster-7", Index: 4, ID: "cluster-7/4", Started: startedAt, Seq: "48192"}
	c := NewRemoveCommand("cluster", runtimeUID, step, "nfd")
	c.Header = header(TypeRemoveCommand, "cluster-7/4/1", "planner")
	return c
}

// samples holds one message of each type with every field set, as a sender fills it. They are
// the golden files' content: testdata/<type>.json.
func samples() map[string]Envelope {
	step := StepRef{Rollout: "cluster-7", Index: 3, ID: "cluster-7/3", Started: startedAt}
	return map[string]Envelope{
		TypeApplyCommand:  sampleApply(),
		TypeRemoveCommand: sampleRemove(),
		TypeApplyResult: &ApplyResult{
			Header:    header(TypeApplyResult, "cluster-7/3/1/result", "applier"),
			CommandID: "cluster-7/3/1", Runtime: "cluster", Release: "gpu-operator", Step: step,
			Action: v1alpha1.ActionUpgrade, Outcome: OutcomeForeign, Reason: v1alpha1.ReasonForeignObject,
			Message:         "Application argocd/gpu-operator is not managed by aicr-operator (label app.kubernetes.io/managed-by is \"argocd\")",
			UID:             "9c3d1e7a-2b4f-4a6e-b8d0-1f5e7c9a3b22",
			ResourceVersion: "48213",
		},
		TypeReleaseVerdict: &ReleaseVerdict{
			Header:  header(TypeReleaseVerdict, "gpu-operator/cluster-7/3/48250", "readiness"),
			Runtime: "cluster", Release: "gpu-operator", StepID: "cluster-7/3", PlanDigest: planDigest,
			Ready: false, Failed: true,
			Fences: []v1alpha1.Fence{
				{Name: v1alpha1.FenceComparedToSpec, State: v1alpha1.FencePassed},
				{Name: v1alpha1.FenceSyncedAtRevision, State: v1alpha1.FenceFailed, Message: "SyncError: one or more objects failed to apply"},
			},
			Observed: ObservedStatus{SyncStatus: "OutOfSync", Revision: "sha256:1111111111111111111111111111111111111111111111111111111111111111",
				Health: "Degraded", OperationPhase: "Failed", ReconciledAt: &sentAt, ResourceVersion: "48250"},
		},
		TypeDriftReport: &DriftReport{
			Header:  header(TypeDriftReport, "gpu-operator/drift/48301", "readiness"),
			Runtime: "cluster", Release: "gpu-operator", PlanDigest: planDigest, StepID: "cluster-7/3",
			Kinds:    []string{DriftAutoSyncDisabled, DriftValues},
			Fields:   []string{"spec.source.helm.valuesObject.driver.version", "spec.syncPolicy.automated.enabled"},
			Managers: []string{"argocd-server"}, ResourceVersion: "48301",
		},
		TypeEngineStatus: &EngineStatus{
			Header:    header(TypeEngineStatus, "engine/ProjectMissing/1", "readiness"),
			Available: false, Reason: v1alpha1.ReasonProjectMissing, Message: "AppProject argocd/aicr is missing; helm upgrade recreates it",
		},
		TypeCredentialsStatus: &CredentialsStatus{
			Header: header(TypeCredentialsStatus, "credentials/2026-05-14T09:30:00Z", "credrefresher"),
			Mode:   "aws", OK: true, Message: "wrote a token for 123456789012.dkr.ecr.us-west-2.amazonaws.com",
			RefreshedAt: &sentAt, ExpiresAt: &expiresAt,
		},
		TypeAdmissionDenial: &AdmissionDenial{
			Header: header(TypeAdmissionDenial, "0d6c5f7e-8a9b-4c1d-9e2f-3a4b5c6d7e8f", "admission"),
			UID:    "0d6c5f7e-8a9b-4c1d-9e2f-3a4b5c6d7e8f", User: "alice@example.com", Operation: "UPDATE",
			Resource: "argoproj.io/applications", Namespace: "argocd", Name: "gpu-operator",
			Rule: "finalizer-outside-remove", Field: "metadata.finalizers",
			Message: "the resources finalizer is added only by an approved Remove step; remove the component through the plan",
		},
	}
}

// typeConstants reads the Type* constants declared in messages.go, so that a new message type
// without a golden file fails this test.
func typeConstants(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(gotoken.NewFileSet(), "messages.go", nil, 0)
	if err != nil {
		t.Fatalf("parse messages.go: %v", err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != gotoken.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if !strings.HasPrefix(n.Name, "Type") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok {
					t.Fatalf("%s is not a string literal", n.Name)
				}
				v, _ := strconv.Unquote(lit.Value)
				out[n.Name] = v
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no Type* constants found in messages.go")
	}
	return out
}

// TestMessageGolden pins the JSON of every message type: the binaries are deployed separately,
// so a field rename is a protocol break that must show up as a golden diff. Run with -update
// to regenerate testdata/<type>.json after an additive change.
func TestMessageGolden(t *testing.T) {
	all := samples()
	consts := typeConstants(t)
	names := make([]string, 0, len(consts))
	for name := range consts {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		typ := consts[name]
		t.Run(typ, func(t *testing.T) {
			msg, ok := all[typ]
			if !ok {
				t.Fatalf("%s (%s) has no sample message in samples(): add one and run with -update", name, typ)
			}
			if msg.MessageType() != typ {
				t.Errorf("MessageType() = %s, want %s", msg.MessageType(), typ)
			}
			wire, err := json.Marshal(msg)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, wire, "", "  "); err != nil {
				t.Fatalf("indent: %v", err)
			}
			pretty.WriteByte('\n')
			golden := filepath.Join("testdata", typ+".json")
			if *update {
				if err := os.WriteFile(golden, pretty.Bytes(), 0o644); err != nil {
					t.Fatalf("write golden: %v", err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden (run with -update to create it): %v", err)
			}
			if diff := cmp.Diff(string(want), pretty.String()); diff != "" {
				t.Errorf("%s differs (-want +got):\n%s", golden, diff)
			}

			// The golden file decodes to the same message, as a receiver decodes it.
			back := reflect.New(reflect.TypeOf(msg).Elem()).Interface().(Envelope)
			if err := json.Unmarshal(want, back); err != nil {
				t.Fatalf("Decode golden: %v", err)
			}
			if diff := cmp.Diff(msg, back); diff != "" {
				t.Errorf("round trip (-sent +received):\n%s", diff)
			}
			// The dispatch loop routes on the header alone.
			var h Header
			if err := json.Unmarshal(want, &h); err != nil || h.Type != typ || h.ID == "" {
				t.Errorf("header = %+v, %v; want type %s and an ID", h, err, typ)
			}
			// snake_case keys only: every message's JSON names follow one convention.
			for _, key := range jsonKeys(t, want) {
				if key != strings.ToLower(key) {
					t.Errorf("key %q is not snake_case", key)
				}
			}
		})
	}
	for typ := range all {
		if !containsValue(consts, typ) {
			t.Errorf("sample %s has no Type* constant", typ)
		}
	}
}

func containsValue(m map[string]string, v string) bool {
	for _, x := range m {
		if x == v {
			return true
		}
	}
	return false
}

// jsonKeys lists every object key in a JSON document, at any depth.
func jsonKeys(t *testing.T, data []byte) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	var keys []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, y := range x {
				keys = append(keys, k)
				walk(y)
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		}
	}
	walk(v)
	return keys
}

// FuzzDecodeMessage feeds arbitrary bytes to what a receiver does with a message: the header
// decode the dispatch loop routes on, then a decode into every message type. Nothing panics, and
// whatever decodes round-trips: encoding the decoded value and decoding that again gives the same
// value, so no message changes meaning on its way through a binary that re-publishes it.
func FuzzDecodeMessage(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatalf("read seed: %v", err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"type":"aicr.v1.ReleaseVerdict","fences":[{"name":1}]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var h Header
		_ = json.Unmarshal(data, &h)
		for typ, sample := range samples() {
			v := reflect.New(reflect.TypeOf(sample).Elem()).Interface().(Envelope)
			if err := json.Unmarshal(data, v); err != nil {
				continue
			}
			once, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("%s decoded but does not encode: %v", typ, err)
			}
			back := reflect.New(reflect.TypeOf(sample).Elem()).Interface().(Envelope)
			if err := json.Unmarshal(once, back); err != nil {
				t.Fatalf("%s: its own encoding does not decode: %v\n%s", typ, err, once)
			}
			twice, err := json.Marshal(back)
			if err != nil || string(once) != string(twice) {
				t.Fatalf("%s does not round-trip:\n%s\n%s", typ, once, twice)
			}
		}
	})
}

// TestCommandConstructorsFillEveryField: a field added to a command but not to its constructor
// would never be sent.
func TestCommandConstructorsFillEveryField(t *testing.T) {
	for _, c := range []Envelope{sampleApply(), sampleRemove()} {
		v := reflect.ValueOf(c).Elem()
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if f.Name == "Header" { // stamped by the Publisher
				continue
			}
			if v.Field(i).IsZero() {
				t.Errorf("%s.%s is not set by its constructor", v.Type().Name(), f.Name)
			}
		}
	}
}

func TestCommandValidate(t *testing.T) {
	tests := map[string]struct {
		cmd     interface{ Validate() error }
		wantErr string // "" for valid
	}{
		"an apply command as the planner sends it": {cmd: sampleApply()},
		"a remove command as the planner sends it": {cmd: sampleRemove()},
		"an apply command without its fields": {
			cmd:     &ApplyCommand{Header: Header{ID: "x/1"}, Action: v1alpha1.ActionInstall},
			wantErr: "command x/1 lacks [plan_digest release runtime runtime_uid step.id]",
		},
		"an apply command without a message ID": {
			cmd:     func() *ApplyCommand { c := sampleApply(); c.ID = ""; return c }(),
			wantErr: "lacks [id]",
		},
		"an apply command asking for a Remove": {
			cmd:     func() *ApplyCommand { c := sampleApply(); c.Action = v1alpha1.ActionRemove; return c }(),
			wantErr: `action "Remove": use Install, Upgrade or Apply (Remove is a RemoveCommand)`,
		},
		"an apply command without an action": {
			cmd:     func() *ApplyCommand { c := sampleApply(); c.Action = ""; return c }(),
			wantErr: `action "": use Install, Upgrade or Apply`,
		},
		"a remove command outside a rollout": {
			cmd:     func() *RemoveCommand { c := sampleRemove(); c.Step.Rollout = ""; return c }(),
			wantErr: "command cluster-7/4/1 lacks [step.rollout] (a Remove belongs to an approved rollout step)",
		},
		"a remove command without its fields": {
			cmd:     &RemoveCommand{Header: Header{ID: "x/1"}},
			wantErr: "lacks [release runtime runtime_uid step.id step.rollout]",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.cmd.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Validate = %v, want an error saying %q", err, tc.wantErr)
			}
		})
	}
}

// TestCommandsOfTheEarlierShape: during an upgrade the applier may receive commands from a
// planner that still sent readiness_gate, engine_policy, force (ApplyCommand) and uid
// (RemoveCommand), which no receiver read (the gate is the plan's): they decode to the same
// command.
func TestCommandsOfTheEarlierShape(t *testing.T) {
	earlierApply := `{"type":"aicr.v1.ApplyCommand","id":"cluster-7/3/1","time":"2026-05-14T09:30:00Z","source":"planner",
		"runtime":"cluster","runtime_uid":"6f1c2b9e-0d4a-4e59-9a53-2d7f3c1e8b10",
		"step":{"rollout":"cluster-7","index":3,"id":"cluster-7/3","started":"2026-05-14T09:29:58Z"},
		"release":"gpu-operator","action":"Upgrade","plan_digest":"` + planDigest + `",
		"readiness_gate":true,"suspend_engine":true,"engine_policy":"argocd.v2","force":true}`
	earlierRemove := `{"type":"aicr.v1.RemoveCommand","id":"cluster-7/4/1","time":"2026-05-14T09:30:00Z","source":"planner",
		"runtime":"cluster","runtime_uid":"6f1c2b9e-0d4a-4e59-9a53-2d7f3c1e8b10",
		"step":{"rollout":"cluster-7","index":4,"id":"cluster-7/4","started":"2026-05-14T09:29:58Z"},
		"release":"nfd","uid":"0b8e2f51-5c1d-4c7e-8f0a-3e9d6b2a7c44"}`
	var apply ApplyCommand
	if err := json.Unmarshal([]byte(earlierApply), &apply); err != nil {
		t.Fatal(err)
	}
	wantApply, wantRemove := sampleApply(), sampleRemove()
	wantApply.Step.Seq, wantRemove.Step.Seq = "", ""
	wantApply.Basis = nil // an earlier planner's repair carries none: the applier orders it as before
	if diff := cmp.Diff(wantApply, &apply); diff != "" {
		t.Errorf("earlier ApplyCommand (-want +got):\n%s", diff)
	}
	var remove RemoveCommand
	if err := json.Unmarshal([]byte(earlierRemove), &remove); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantRemove, &remove); diff != "" {
		t.Errorf("earlier RemoveCommand (-want +got):\n%s", diff)
	}
}
