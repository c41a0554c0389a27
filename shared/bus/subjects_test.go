package bus

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSubjectBuilders proves each builder makes the documented subject, that it falls under
// its pattern and its stream's subjects, and under no other command pattern.
func TestSubjectBuilders(t *testing.T) {
	cases := map[string]struct {
		got, want string
		pattern   string
		stream    string
	}{
		"apply":       {ApplySubject("cluster", "gpu-operator"), "aicr.v1.cmd.apply.cluster.gpu-operator", SubjectApplyPattern, SubjectCommands},
		"remove":      {RemoveSubject("cluster", "nfd"), "aicr.v1.cmd.remove.cluster.nfd", SubjectRemovePattern, SubjectCommands},
		"applied":     {AppliedSubject("cluster", "gpu-operator"), "aicr.v1.evt.applied.cluster.gpu-operator", SubjectAppliedPattern, SubjectEvents},
		"verdict":     {VerdictSubject("cluster", "gpu-operator"), "aicr.v1.evt.release.cluster.gpu-operator", SubjectVerdictPattern, SubjectEvents},
		"drift":       {DriftSubject("cluster", "gpu-operator"), "aicr.v1.evt.drift.cluster.gpu-operator", SubjectDriftPattern, SubjectEvents},
		"engine":      {SubjectEngine, "aicr.v1.evt.engine", SubjectEngine, SubjectEvents},
		"credentials": {SubjectCredentials, "aicr.v1.evt.credentials", SubjectCredentials, SubjectEvents},
		"audit":       {SubjectAudit, "aicr.v1.evt.audit.admission", SubjectAudit, SubjectEvents},
	}
	patterns := []string{SubjectApplyPattern, SubjectRemovePattern, SubjectAppliedPattern, SubjectVerdictPattern, SubjectDriftPattern}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("subject (-want +got):\n%s", diff)
			}
			if !MatchSubject(tc.pattern, tc.got) {
				t.Errorf("%s does not match its pattern %s", tc.got, tc.pattern)
			}
			if !MatchSubject(tc.stream, tc.got) {
				t.Errorf("%s is outside its stream's subjects %s", tc.got, tc.stream)
			}
			for _, p := range patterns {
				if p != tc.pattern && MatchSubject(p, tc.got) {
					t.Errorf("%s also matches %s", tc.got, p)
				}
			}
		})
	}
	if MatchSubject(SubjectCommands, SubjectEngine) || MatchSubject(SubjectEvents, ApplySubject("a", "b")) {
		t.Errorf("the commands and events streams overlap")
	}
}

// TestSubjectTokens proves a name can never add a subject level, a wildcard or protocol
// whitespace: whatever the runtime and release names, the subject has exactly five tokens and
// still matches only its own pattern.
func TestSubjectTokens(t *testing.T) {
	cases := map[string]struct {
		runtime, release string
		want             string
	}{
		"valid names pass unchanged":  {"cluster", "gpu-operator-readiness", "aicr.v1.cmd.apply.cluster.gpu-operator-readiness"},
		"a dot does not add a level":  {"cluster", "nvidia.gpu", "aicr.v1.cmd.apply.cluster.nvidia_gpu"},
		"wildcards are not wildcards": {"*", "a>", "aicr.v1.cmd.apply._.a_"},
		"an empty name is a token":    {"", "", "aicr.v1.cmd.apply._._"},
		"a space":                     {"clu ster", "gpu", "aicr.v1.cmd.apply.clu_ster.gpu"},
		"a tab, CR and LF":            {"a\tb", "c\r\nd", "aicr.v1.cmd.apply.a_b.c__d"},
		"a NUL byte":                  {"a\x00b", "c", "aicr.v1.cmd.apply.a_b.c"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ApplySubject(tc.runtime, tc.release)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ApplySubject (-want +got):\n%s", diff)
			}
			assertSubjectShape(t, got)
		})
	}
}

func assertSubjectShape(t *testing.T, subject string) {
	t.Helper()
	toks := strings.Split(subject, ".")
	if len(toks) != 6 {
		t.Fatalf("%q has %d tokens, want 6", subject, len(toks))
	}
	for _, tok := range toks {
		if tok == "" || tok == "*" || tok == ">" {
			t.Errorf("%q has the token %q", subject, tok)
		}
		for _, r := range tok {
			if r <= ' ' || r == 0x7f {
				t.Errorf("%q carries the control or space character %q", subject, r)
			}
		}
	}
	if !MatchSubject(SubjectApplyPattern, subject) {
		t.Errorf("%q does not match %s", subject, SubjectApplyPattern)
	}
}

// FuzzSubjectTokens: any names give a well-formed apply subject.
func FuzzSubjectTokens(f *testing.F) {
	f.Add("cluster", "gpu-operator")
	f.Add("a.b", "*>")
	f.Add("\t", "\n")
	f.Fuzz(func(t *testing.T, runtime, release string) {
		assertSubjectShape(t, ApplySubject(runtime, release))
	})
}
