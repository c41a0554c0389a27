package bus

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSubjectBuilders proves each builder makes the documented subject, that it falls under
// its pattern and its stream's subjects, and under no other command pattern.
func TestSubjectBuilders(t *testing.T) {
	t.Parallel()
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
			t.Parallel()
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
// whitespace: whatever the runtime and release names, the subject has exactly six tokens and
// still matches only its own pattern; and that names that differ give different subjects.
func TestSubjectTokens(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		runtime, release string
		want             string
	}{
		"valid names pass unchanged":         {"cluster", "gpu-operator-readiness", "aicr.v1.cmd.apply.cluster.gpu-operator-readiness"},
		"a dot does not add a level":         {"cluster", "nvidia.gpu", "aicr.v1.cmd.apply.cluster.nvidia_2egpu"},
		"an underscore is escaped too":       {"cluster", "nvidia_2egpu", "aicr.v1.cmd.apply.cluster.nvidia_5f2egpu"},
		"wildcards are not wildcards":        {"*", "a>", "aicr.v1.cmd.apply._2a.a_3e"},
		"an empty name is a token":           {"", "", "aicr.v1.cmd.apply._._"},
		"a lone underscore is not the empty": {"_", "", "aicr.v1.cmd.apply._5f._"},
		"a space":                            {"clu ster", "gpu", "aicr.v1.cmd.apply.clu_20ster.gpu"},
		"a tab, CR and LF":                   {"a\tb", "c\r\nd", "aicr.v1.cmd.apply.a_09b.c_0d_0ad"},
		"a NUL byte":                         {"a\x00b", "c", "aicr.v1.cmd.apply.a_00b.c"},
		"non-ASCII, valid UTF-8 or not":      {"grü", "\xff", "aicr.v1.cmd.apply.gr_c3_bc._ff"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
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

// untoken inverts token: that it exists proves token one-to-one.
func untoken(t *testing.T, tok string) string {
	t.Helper()
	if tok == "_" {
		return ""
	}
	var b strings.Builder
	for i := 0; i < len(tok); i++ {
		if tok[i] != '_' {
			b.WriteByte(tok[i])
			continue
		}
		if i+2 >= len(tok) {
			t.Fatalf("token %q: a cut escape at %d", tok, i)
		}
		v, err := strconv.ParseUint(tok[i+1:i+3], 16, 8)
		if err != nil {
			t.Fatalf("token %q: escape %q at %d: %v", tok, tok[i:i+3], i, err)
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String()
}

// FuzzSubjectTokens: any names give a well-formed apply subject, whose tokens give the names
// back, so two different releases (or runtimes) never share a subject.
func FuzzSubjectTokens(f *testing.F) {
	f.Add("cluster", "gpu-operator", "gpu_operator")
	f.Add("a.b", "*>", "a_b")
	f.Add("\t", "\n", "_0a")
	f.Add("", "_", "\xff")
	f.Fuzz(func(t *testing.T, runtime, release, other string) {
		subject := ApplySubject(runtime, release)
		assertSubjectShape(t, subject)
		toks := strings.Split(subject, ".")
		if got := untoken(t, toks[4]); got != runtime {
			t.Errorf("runtime token %q of %q gives %q back", toks[4], runtime, got)
		}
		if got := untoken(t, toks[5]); got != release {
			t.Errorf("release token %q of %q gives %q back", toks[5], release, got)
		}
		if release != other && ApplySubject(runtime, other) == subject {
			t.Errorf("releases %q and %q share the subject %s", release, other, subject)
		}
	})
}
