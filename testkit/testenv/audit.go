package testenv

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// applicationAuditArgs writes into dir an audit policy that logs each list, watch and get of an
// Argo CD Application at level Metadata (its request URI and user agent), and returns the
// kube-apiserver flags that log it to the returned path, each event written before the request
// is answered (Options.AuditApplications).
func applicationAuditArgs(dir string) (args []string, logPath string, err error) {
	const policy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["list", "watch", "get"]
  resources: [{group: "argoproj.io", resources: ["applications"]}]
- level: None
`
	path := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(path, []byte(policy), 0o600); err != nil {
		return nil, "", err
	}
	logPath = filepath.Join(dir, "audit.log")
	return []string{"--audit-policy-file=" + path, "--audit-log-path=" + logPath,
		"--audit-log-mode=blocking", "--audit-log-format=json"}, logPath, nil
}

// AuditEvent is what a test reads of an audit event.
type AuditEvent struct {
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	UserAgent  string `json:"userAgent"`
	ObjectRef  struct {
		Resource string `json:"resource"`
		Name     string `json:"name"`
	} `json:"objectRef"`
}

// ApplicationReads returns the lists, watches and gets of Applications the API server logged
// (Options.AuditApplications) of a client whose user agent starts with userAgent.
func (e *Env) ApplicationReads(t testing.TB, userAgent string) []AuditEvent {
	t.Helper()
	if e.applicationAuditLog == "" {
		t.Fatal("testenv: Env.ApplicationReads needs Options.AuditApplications")
	}
	raw, err := os.ReadFile(e.applicationAuditLog)
	if err != nil {
		t.Fatal(err)
	}
	var out []AuditEvent
	for _, line := range strings.Split(string(raw), "\n") {
		if line == "" {
			continue
		}
		var e AuditEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit log line %q: %v", line, err)
		}
		if strings.HasPrefix(e.UserAgent, userAgent) && e.ObjectRef.Resource == "applications" {
			out = append(out, e)
		}
	}
	return out
}
