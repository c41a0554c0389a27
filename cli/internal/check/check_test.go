package check

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestExitCodes(t *testing.T) {
	seen := map[int]string{}
	for _, n := range Names {
		c := ExitCode(n)
		if c < 3 || seen[c] != "" {
			t.Errorf("check %s: exit %d (taken by %q, or one of the plugin's 0, 1, 2)", n, c, seen[c])
		}
		seen[c] = n
	}
	results := []Result{pass(CRDs, "x"), {Name: Binaries, State: Skipped}, fail(Leaders, "x"), fail(RepoCreds, "y")}
	if got := Exit(results); got != ExitCode(Leaders) {
		t.Errorf("Exit: %d, want the first failed check's, %d", got, ExitCode(Leaders))
	}
	if got := Exit(results[:2]); got != 0 {
		t.Errorf("Exit with none failed: %d", got)
	}
	var b bytes.Buffer
	if err := Write(&b, results); err != nil || !strings.Contains(b.String(), "[FAIL]  leaders") || !strings.Contains(b.String(), "2 check(s) failed; exit 7 (3 crds, 4 webhook") {
		t.Errorf("Write: %v\n%s", err, b.String())
	}
}

func TestJudge(t *testing.T) {
	now := time.Date(2026, 12, 7, 4, 0, 0, 0, time.UTC)
	ready := func(c string) Workload {
		return Workload{Name: "deployment/aicr-operator-" + c, Component: c, Desired: 2, Ready: 2}
	}
	five := []Workload{ready("planner"), ready("applier"), ready("readiness"), ready("credrefresher"), ready("admission")}
	short := append([]Workload(nil), five...)
	short[1].Ready = 1
	for _, c := range []struct {
		name  string
		got   Result
		state State
		want  string
	}{
		{"crds served", JudgeCRDs(CRDFacts{Served: []string{"clusterruntimes", "clusterruntimes/status", "runtimerollouts"}}, "g"), Pass, "served"},
		{"crds missing", JudgeCRDs(CRDFacts{Served: []string{"clusterruntimes"}}, "g"), Fail, "does not serve runtimerollouts.g: the operator's CRDs are not installed"},
		{"webhook denied", JudgeWebhook(WebhookProbe{Webhook: "w", Err: errors.New(`admission webhook "w" denied the request: no`)}), Pass, "w answered"},
		{"webhook down", JudgeWebhook(WebhookProbe{Webhook: "w", Err: errors.New(`Internal error occurred: failed calling webhook "w": connection refused`)}), Fail, "cannot reach the webhook"},
		{"webhook missing", JudgeWebhook(WebhookProbe{Webhook: "w"}), Fail, "missing or does not select plans"},
		{"webhook forbidden", JudgeWebhook(WebhookProbe{Webhook: "w", Err: errors.New("configmaps is forbidden")}), Fail, "could not probe"},
		{"binaries ready", JudgeBinaries(five, "ns"), Pass, "ready"},
		{"binary short", JudgeBinaries(short, "ns"), Fail, "deployment/aicr-operator-applier has 1/2 replicas ready"},
		{"binary missing", JudgeBinaries(five[:4], "ns"), Fail, "admission has no Deployment"},
		{"no deployments", JudgeBinaries(nil, "ns"), Skipped, "no Deployment of the operator in ns"},
		{"nats ready", JudgeNATS([]Workload{{Name: "statefulset/n", Desired: 3, Ready: 3}}, Result{}), Pass, "statefulset/n ready (3/3)"},
		{"nats short", JudgeNATS([]Workload{{Name: "statefulset/n", Desired: 3, Ready: 2}}, Result{}), Fail, "2/3"},
		{"external nats", JudgeNATS(nil, Result{State: Pass}), Pass, "every binary is ready"},
		{"external nats, binaries not ready", JudgeNATS(nil, Result{State: Fail}), Fail, "unknown"},
		{"leaders", JudgeLeaders([]Lease{{Name: "aicr-planner", Found: true, Holder: "p-1", Renewed: now.Add(-5 * time.Second), Duration: 15 * time.Second}}, now), Pass, "aicr-planner by p-1"},
		{"leader lapsed", JudgeLeaders([]Lease{{Name: "aicr-planner", Found: true, Holder: "p-1", Renewed: now.Add(-time.Minute), Duration: 15 * time.Second}}, now), Fail, "more than its 15s ago"},
		{"no lease", JudgeLeaders([]Lease{{Name: "aicr-readiness"}}, now), Fail, "no Lease aicr-readiness"},
		{"no holder", JudgeLeaders([]Lease{{Name: "aicr-readiness", Found: true}}, now), Fail, "has no holder"},
		{"argocd", JudgeArgoCD(ArgoCDFacts{Served: []string{"applications", "appprojects"}, Version: "v3.4.2", SupportedPrefix: "v3.4.", EngineStatus: "True"}), Pass, "version v3.4.2, readiness reports the engine available"},
		{"argocd other version", JudgeArgoCD(ArgoCDFacts{Served: []string{"applications", "appprojects"}, Version: "v2.13.0", SupportedPrefix: "v3.4."}), Pass, "tested with v3.4.x"},
		{"argocd missing", JudgeArgoCD(ArgoCDFacts{}), Fail, "Argo CD is not installed"},
		{"engine unavailable", JudgeArgoCD(ArgoCDFacts{Served: []string{"applications", "appprojects"}, EngineStatus: "False", EngineReason: "ProjectMissing", EngineMessage: "no AppProject aicr"}), Fail, "ProjectMissing: no AppProject aicr"},
		{"creds ok", JudgeRepoCreds(RepoCredsFacts{Namespace: "argocd", Name: "s", Found: true, Label: "repo-creds", URL: "oci://r/aicr", HasUsername: true, HasPassword: true}), Pass, "oci://r/aicr accepts its credentials"},
		{"creds missing", JudgeRepoCreds(RepoCredsFacts{Namespace: "argocd", Name: "s"}), Fail, "Secret argocd/s not found"},
		{"creds unlabelled", JudgeRepoCreds(RepoCredsFacts{Namespace: "argocd", Name: "s", Found: true, URL: "oci://r"}), Fail, `secret-type is ""`},
		{"creds no login", JudgeRepoCreds(RepoCredsFacts{Namespace: "argocd", Name: "s", Found: true, Label: "repo-creds", URL: "oci://r", HasUsername: true}), Fail, "data.username and data.password"},
		{"creds refused", JudgeRepoCreds(RepoCredsFacts{Namespace: "argocd", Name: "s", Found: true, Label: "repo-creds", URL: "oci://r", HasUsername: true, HasPassword: true, Probe: errors.New("401"), Unauthorized: true}), Fail, "the registry refuses"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.got.State != c.state || !strings.Contains(c.got.Message, c.want) {
				t.Errorf("%s %q; want %s with %q", c.got.State, c.got.Message, c.state, c.want)
			}
			if (c.state == Fail) != (c.got.ExitCode != 0) {
				t.Errorf("exit code %d for state %s", c.got.ExitCode, c.got.State)
			}
		})
	}
}
