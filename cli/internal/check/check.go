// Package check is what kubectl aicr check decides from what it read: each preflight check's
// verdict and message, and the exit code. It reads only its arguments (table tests); the
// command gathers the facts from the API server and the registry.
package check

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// The checks, in the order they run and are reported, and each one's exit code when it is the
// first that failed. 0 is every check passed; 1 and 2 stay the plugin's (an error before any
// check, a command-line mistake).
const (
	CRDs      = "crds"
	Webhook   = "webhook"
	Binaries  = "binaries"
	NATS      = "nats"
	Leaders   = "leaders"
	ArgoCD    = "argocd"
	RepoCreds = "repo-creds" //nolint:gosec // G101: a check's name, not a credential
)

// Names are the checks in order.
var Names = []string{CRDs, Webhook, Binaries, NATS, Leaders, ArgoCD, RepoCreds}

// ExitCode is the exit code of a failed check.
func ExitCode(name string) int {
	if i := slices.Index(Names, name); i >= 0 {
		return 3 + i
	}
	return 1
}

// State is a check's verdict.
type State string

// The verdicts.
const (
	Pass State = "ok"
	Fail State = "FAIL"
	// Skipped: --skip named it, or what it checks is not there to check (the local stack runs the
	// binaries as processes, not Deployments).
	Skipped State = "skipped"
)

// Result is one check's verdict.
type Result struct {
	Name    string `json:"name"`
	State   State  `json:"state"`
	Message string `json:"message"`
	// ExitCode is the command's exit code when this is the first check that failed.
	ExitCode int `json:"exitCode,omitempty"`
}

func pass(name, format string, args ...any) Result {
	return Result{Name: name, State: Pass, Message: fmt.Sprintf(format, args...)}
}

func fail(name, format string, args ...any) Result {
	return Result{Name: name, State: Fail, Message: fmt.Sprintf(format, args...), ExitCode: ExitCode(name)}
}

// Exit is the exit code of results: the first failed check's, else 0.
func Exit(results []Result) int {
	for _, r := range results {
		if r.State == Fail {
			return r.ExitCode
		}
	}
	return 0
}

// Write prints one line per check.
func Write(w io.Writer, results []Result) error {
	for _, r := range results {
		if _, err := fmt.Fprintf(w, "%-7s %-10s %s\n", "["+string(r.State)+"]", r.Name, r.Message); err != nil {
			return err
		}
	}
	failed := 0
	for _, r := range results {
		if r.State == Fail {
			failed++
		}
	}
	var err error
	if failed == 0 {
		_, err = fmt.Fprintln(w, "all checks passed")
	} else {
		_, err = fmt.Fprintf(w, "%d check(s) failed; exit %d (%s)\n", failed, Exit(results), codes())
	}
	return err
}

func codes() string {
	var out []string
	for _, n := range Names {
		out = append(out, fmt.Sprintf("%d %s", ExitCode(n), n))
	}
	return strings.Join(out, ", ")
}

// CRDFacts are the operator's resources the API server serves (discovery of
// operator.aicr.run/v1alpha1); Err is discovery's error for the group.
type CRDFacts struct {
	Served []string
	Err    error
}

// CRDResources are the resources of the operator's CRDs.
var CRDResources = []string{"clusterruntimes", "runtimerollouts"}

// JudgeCRDs wants both of the operator's resources served.
func JudgeCRDs(f CRDFacts, group string) Result {
	var missing []string
	for _, r := range CRDResources {
		if !slices.Contains(f.Served, r) {
			missing = append(missing, r+"."+group)
		}
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("the API server does not serve %s: the operator's CRDs are not installed (helm install the chart, or kubectl apply -f shared/api/crds)", strings.Join(missing, ", "))
		if f.Err != nil {
			msg += fmt.Sprintf(" (discovery: %v)", f.Err)
		}
		return fail(CRDs, "%s", msg)
	}
	return pass(CRDs, "%s served", strings.Join(CRDResources, " and "))
}

// WebhookProbe is the answer to a server-side dry-run create of a plan ConfigMap whose content
// does not match its digest, which the plans webhook must deny.
type WebhookProbe struct {
	// Webhook is the webhook the probe goes to (plans.admission.aicr.run).
	Webhook string
	// Err is the API server's answer: nil when the dry run was admitted.
	Err error
}

// JudgeWebhook passes when the webhook itself denied the probe: it was called and answered.
func JudgeWebhook(p WebhookProbe) Result {
	switch {
	case p.Err == nil:
		return fail(Webhook, "no webhook refused a plan ConfigMap whose content does not match its digest: the ValidatingWebhookConfiguration with %s is missing or does not select plans", p.Webhook)
	case strings.Contains(p.Err.Error(), `admission webhook "`+p.Webhook+`" denied the request`):
		return pass(Webhook, "%s answered (it denied a dry-run plan ConfigMap, as it must)", p.Webhook)
	case strings.Contains(p.Err.Error(), "failed calling webhook"):
		return fail(Webhook, "the API server cannot reach the webhook (is the admission Deployment ready, its Service and certificate right?): %v", p.Err)
	}
	return fail(Webhook, "could not probe the webhook with a dry-run create of a plan ConfigMap: %v", p.Err)
}

// Workload is a Deployment or StatefulSet and how many of its replicas are ready.
type Workload struct {
	Name            string
	Component       string
	Desired, Ready  int32
	UpdatedReplicas int32
}

// BinaryNames are the five binaries, as the chart labels their Deployments
// (app.kubernetes.io/component).
var BinaryNames = v1alpha1.Binaries()

// JudgeBinaries wants the five Deployments, each with every replica ready: a binary's /readyz
// passes only with NATS and the API server reachable and its own checks passing.
func JudgeBinaries(deployments []Workload, namespace string) Result {
	if len(deployments) == 0 {
		return Result{Name: Binaries, State: Skipped, Message: fmt.Sprintf("no Deployment of the operator in %s (the local stack runs the binaries as processes; is -n the operator namespace?)", namespace)}
	}
	var bad []string
	for _, b := range BinaryNames {
		i := slices.IndexFunc(deployments, func(w Workload) bool { return w.Component == b })
		switch {
		case i < 0:
			bad = append(bad, b+" has no Deployment")
		case deployments[i].Desired == 0:
			bad = append(bad, deployments[i].Name+" is scaled to 0")
		case deployments[i].Ready < deployments[i].Desired:
			bad = append(bad, fmt.Sprintf("%s has %d/%d replicas ready", deployments[i].Name, deployments[i].Ready, deployments[i].Desired))
		}
	}
	if len(bad) > 0 {
		return fail(Binaries, "%s (a binary is ready when NATS and the API server answer it; kubectl aicr logs shows why not)", strings.Join(bad, "; "))
	}
	return pass(Binaries, "the five binaries' Deployments are ready")
}

// JudgeNATS wants the chart's NATS StatefulSet ready; without one (nats.enabled false, or the
// local stack), the binaries' readiness is the proof that they reach NATS.
func JudgeNATS(nats []Workload, binaries Result) Result {
	if len(nats) == 0 {
		switch binaries.State {
		case Pass:
			return pass(NATS, "no NATS StatefulSet of the chart (an external NATS): every binary is ready, so each reaches it")
		case Fail:
			return fail(NATS, "no NATS StatefulSet of the chart, and not every binary is ready: whether they reach NATS is unknown")
		}
		return Result{Name: NATS, State: Skipped, Message: "no NATS StatefulSet of the chart and no Deployment of the operator to judge by"}
	}
	var bad []string
	for _, n := range nats {
		if n.Desired == 0 || n.Ready < n.Desired {
			bad = append(bad, fmt.Sprintf("%s has %d/%d replicas ready", n.Name, n.Ready, n.Desired))
		}
	}
	if len(bad) > 0 {
		return fail(NATS, "%s", strings.Join(bad, "; "))
	}
	return pass(NATS, "StatefulSet %s ready (%d/%d)", nats[0].Name, nats[0].Ready, nats[0].Desired)
}

// Lease is a leader-election Lease as read (Found false: there is none).
type Lease struct {
	Name     string
	Found    bool
	Holder   string
	Renewed  time.Time
	Duration time.Duration
	// Err is the error reading it (not a NotFound).
	Err error
}

// JudgeLeaders wants each leader-elected binary's Lease held and renewed within its duration
// (client-go's rule for a live leader).
func JudgeLeaders(leases []Lease, now time.Time) Result {
	var held, bad []string
	for _, l := range leases {
		switch {
		case l.Err != nil:
			bad = append(bad, fmt.Sprintf("read Lease %s: %v", l.Name, l.Err))
		case !l.Found:
			bad = append(bad, "no Lease "+l.Name+" (the binary has never led)")
		case l.Holder == "":
			bad = append(bad, "Lease "+l.Name+" has no holder")
		case l.Renewed.IsZero() || now.After(l.Renewed.Add(l.Duration)):
			bad = append(bad, fmt.Sprintf("Lease %s held by %s was last renewed %s, more than its %s ago", l.Name, l.Holder, l.Renewed.UTC().Format(time.RFC3339), l.Duration))
		default:
			held = append(held, l.Name+" by "+l.Holder)
		}
	}
	if len(bad) > 0 {
		return fail(Leaders, "%s", strings.Join(bad, "; "))
	}
	return pass(Leaders, "%s", strings.Join(held, ", "))
}

// ArgoCDFacts are Argo CD's resources the API server serves (argoproj.io/v1alpha1), the
// version of its application controller's image (empty: not found), and the runtime's
// EngineAvailable condition (readiness's report: the CRDs and the AppProject).
type ArgoCDFacts struct {
	Served          []string
	Err             error
	Version         string
	EngineStatus    string // "True", "False", "Unknown" or "" (no runtime, no condition)
	EngineReason    string
	EngineMessage   string
	SupportedPrefix string // such as "v3.4."
}

// JudgeArgoCD wants Argo CD's Application and AppProject CRDs served and, when the runtime has
// the condition, readiness finding the engine available.
func JudgeArgoCD(f ArgoCDFacts) Result {
	var missing []string
	for _, r := range []string{"applications", "appprojects"} {
		if !slices.Contains(f.Served, r) {
			missing = append(missing, r+".argoproj.io")
		}
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("the API server does not serve %s: Argo CD is not installed", strings.Join(missing, ", "))
		if f.Err != nil {
			msg += fmt.Sprintf(" (discovery: %v)", f.Err)
		}
		return fail(ArgoCD, "%s", msg)
	}
	if f.EngineStatus == "False" {
		return fail(ArgoCD, "readiness reports the engine unavailable: %s: %s", f.EngineReason, f.EngineMessage)
	}
	version := "version unknown (no argocd-application-controller workload with a tagged image found)"
	if f.Version != "" {
		version = "version " + f.Version
		if f.SupportedPrefix != "" && !strings.HasPrefix(f.Version, f.SupportedPrefix) {
			version += " (the operator is tested with " + strings.TrimSuffix(f.SupportedPrefix, ".") + ".x)"
		}
	}
	msg := "Application and AppProject CRDs served, " + version
	if f.EngineStatus == "True" {
		msg += ", readiness reports the engine available"
	}
	return pass(ArgoCD, "%s", msg)
}

// RepoCredsFacts are what the repo-creds Secret holds (never its password) and the registry's
// answer to a read with its credentials.
type RepoCredsFacts struct {
	Namespace, Name string
	Found           bool
	Err             error // reading the Secret
	Label           string
	URL             string
	HasUsername     bool
	HasPassword     bool
	// Probe is the registry's answer to a blob check with the credentials; nil: accepted.
	Probe error
	// Unauthorized says Probe is the registry refusing the credentials.
	Unauthorized bool
}

// JudgeRepoCreds wants the Secret labelled as Argo CD's repo-creds, with a URL and a login, and
// the registry accepting that login.
func JudgeRepoCreds(f RepoCredsFacts) Result {
	where := f.Namespace + "/" + f.Name
	switch {
	case f.Err != nil:
		return fail(RepoCreds, "read Secret %s: %v", where, f.Err)
	case !f.Found:
		return fail(RepoCreds, "Secret %s not found: Argo CD has no credentials for the registry (docs/argocd.md; --repo-creds-secret names another)", where)
	case f.Label != "repo-creds":
		return fail(RepoCreds, "Secret %s: label argocd.argoproj.io/secret-type is %q; Argo CD uses it only as repo-creds", where, f.Label)
	case f.URL == "":
		return fail(RepoCreds, "Secret %s: data.url is empty; it must be oci://<registry>/<repository>", where)
	case !f.HasUsername || !f.HasPassword:
		return fail(RepoCreds, "Secret %s: data.username and data.password must both be set", where)
	case f.Unauthorized:
		return fail(RepoCreds, "the registry refuses Secret %s's credentials: %v", where, f.Probe)
	case f.Probe != nil:
		return fail(RepoCreds, "could not ask the registry with Secret %s's credentials: %v", where, f.Probe)
	}
	return pass(RepoCreds, "Secret %s present, and %s accepts its credentials", where, f.URL)
}
