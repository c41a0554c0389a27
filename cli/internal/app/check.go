package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/ociregistry"
	"github.com/aicr-run/aicr-operator/shared/plan"

	"github.com/aicr-run/aicr-operator/cli/internal/check"
	"github.com/aicr-run/aicr-operator/cli/internal/kube"
	"github.com/aicr-run/aicr-operator/cli/internal/output"
)

// plansWebhook is the webhook the check's dry-run probe goes to.
const plansWebhook = "plans.admission.aicr.run"

// supportedArgoCD is the Argo CD minor the operator is built and tested against.
const supportedArgoCD = "v3.4."

// leaderBinaries elect a leader on a Lease (the chart's aicr.leaderBinaries).
var leaderBinaries = []string{v1alpha1.BinaryPlanner, v1alpha1.BinaryReadiness, v1alpha1.BinaryCredRefresher}

func newCheckCmd(o *options) *cobra.Command {
	var engineNS, secret string
	var skip []string
	out := output.NewFlags()
	cmd := &cobra.Command{
		Use:   "check [--skip CHECK,...]",
		Short: "Preflight: CRDs, webhook, binaries, NATS, leaders, Argo CD, registry credentials",
		Long: `Check that the operator can work, from the API server (and, for the credentials, the registry):

  crds        the API server serves clusterruntimes and runtimerollouts (operator.aicr.run)
  webhook     the admission webhook answers: a server-side dry-run create of a plan ConfigMap
              whose content does not match its digest must be denied by plans.admission.aicr.run
  binaries    the five Deployments have every replica ready (a binary is ready when NATS and the
              API server answer it and its own checks pass)
  nats        the chart's NATS StatefulSet is ready (with an external NATS: the binaries' readiness)
  leaders     planner, readiness and credrefresher each have a Lease held and renewed in time
  argocd      Argo CD's Application and AppProject CRDs are served, its application controller's
              version, and readiness's report of the engine (the runtime's EngineAvailable)
  repo-creds  the repo-creds Secret is there, labelled for Argo CD, with a URL and a login, and the
              registry accepts that login (a read of a blob; the password is never printed)

Every check runs; each prints ok, FAIL or skipped (--skip, or nothing to check: the local stack runs
the binaries as processes). The exit code is 0 when none failed, else the first failed check's:
3 crds, 4 webhook, 5 binaries, 6 nats, 7 leaders, 8 argocd, 9 repo-creds (1 is an error before
any check, 2 a command-line mistake). The webhook probe needs the right to create ConfigMaps in the
operator namespace (a dry run writes nothing), repo-creds to get the Secret.`,
		Example: `  # Before the first ClusterRuntime, or in CI after an install
  kubectl aicr check

  # Without the registry (no route to it from here)
  kubectl aicr check --skip repo-creds

  # Which checks failed, for a script
  kubectl aicr check -o jsonpath='{range .items[?(@.state=="FAIL")]}{.name}{"\n"}{end}'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, s := range skip {
				if !slices.Contains(check.Names, s) {
					return usagef("--skip %q: use one or more of %s", s, strings.Join(check.Names, ", "))
				}
			}
			if err := out.Validate(); err != nil {
				return err
			}
			kc, err := o.client()
			if err != nil {
				return err
			}
			results := o.runChecks(cmd.Context(), kc, engineNS, secret, skip)
			if err := out.Print(o.env.Stdout, output.Doc{
				Object: map[string]any{"apiVersion": "v1", "kind": "List", "items": results},
				Names:  checkNames(results),
				Text:   func(w io.Writer) error { return check.Write(w, results) },
			}); err != nil {
				return err
			}
			if code := check.Exit(results); code != 0 {
				return &exitError{code: code}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&engineNS, "engine-namespace", v1alpha1.DefaultEngineNamespace, "engine.namespace: Argo CD's namespace, where the repo-creds Secret is")
	cmd.Flags().StringVar(&secret, "repo-creds-secret", v1alpha1.DefaultRepoCredsSecret, "registry.auth.repoCredsSecret: the repo-creds Secret's name")
	cmd.Flags().StringSliceVar(&skip, "skip", nil, "Checks not to run: "+strings.Join(check.Names, ", "))
	_ = cmd.RegisterFlagCompletionFunc("skip", fixedCompletions(check.Names...))
	out.AddFlags(cmd)
	return cmd
}

func checkNames(results []check.Result) []string {
	var out []string
	for _, r := range results {
		out = append(out, "check/"+r.Name)
	}
	return out
}

// runChecks gathers each check's facts and judges them, in check.Names order.
func (o *options) runChecks(ctx context.Context, kc *kube.Client, engineNS, secret string, skip []string) []check.Result {
	var results []check.Result
	byName := map[string]check.Result{}
	for _, name := range check.Names {
		var r check.Result
		if slices.Contains(skip, name) {
			r = check.Result{Name: name, State: check.Skipped, Message: "--skip"}
		} else {
			r = o.runCheck(ctx, kc, name, engineNS, secret, byName)
		}
		byName[name] = r
		results = append(results, r)
	}
	return results
}

func (o *options) runCheck(ctx context.Context, kc *kube.Client, name, engineNS, secret string, done map[string]check.Result) check.Result {
	switch name {
	case check.CRDs:
		served, err := servedResources(kc, v1alpha1.SchemeGroupVersion.String())
		return check.JudgeCRDs(check.CRDFacts{Served: served, Err: err}, v1alpha1.Group)
	case check.Webhook:
		return check.JudgeWebhook(check.WebhookProbe{Webhook: plansWebhook, Err: probeWebhook(ctx, kc)})
	case check.Binaries:
		deps, err := operatorWorkloads(ctx, kc, false)
		if err != nil {
			return check.Result{Name: name, State: check.Fail, Message: err.Error(), ExitCode: check.ExitCode(name)}
		}
		return check.JudgeBinaries(deps, kc.Namespace)
	case check.NATS:
		sets, err := operatorWorkloads(ctx, kc, true)
		if err != nil {
			return check.Result{Name: name, State: check.Fail, Message: err.Error(), ExitCode: check.ExitCode(name)}
		}
		return check.JudgeNATS(sets, done[check.Binaries])
	case check.Leaders:
		return check.JudgeLeaders(leases(ctx, kc), o.env.Clock.Now())
	case check.ArgoCD:
		return check.JudgeArgoCD(argoFacts(ctx, kc, engineNS))
	case check.RepoCreds:
		return check.JudgeRepoCreds(repoCredsFacts(ctx, kc, engineNS, secret))
	}
	return check.Result{Name: name, State: check.Fail, Message: "unknown check", ExitCode: 1}
}

// servedResources lists the resources the API server serves in groupVersion ("" and an error
// when it serves none).
func servedResources(kc *kube.Client, groupVersion string) ([]string, error) {
	list, err := kc.Kube.Discovery().ServerResourcesForGroupVersion(groupVersion)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	var out []string
	for _, r := range list.APIResources {
		out = append(out, r.Name)
	}
	return out, nil
}

// probeWebhook asks the API server to create, as a dry run, a plan ConfigMap whose content is
// not the plan its digest names: the plans webhook must deny it. Nothing is stored.
func probeWebhook(ctx context.Context, kc *kube.Client) error {
	digest := "sha256:" + strings.Repeat("0", 64)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: plan.ConfigMapName(digest), Namespace: kc.Namespace,
			Labels:      map[string]string{v1alpha1.LabelRole: v1alpha1.PlanRoleValue},
			Annotations: map[string]string{v1alpha1.AnnotationPlanDigest: digest},
		},
		Data: map[string]string{"plan.json": "{}"},
	}
	_, err := kc.Kube.CoreV1().ConfigMaps(kc.Namespace).Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// operatorWorkloads lists the operator's Deployments (the binaries) or, with statefulSets, the
// StatefulSets labelled as the chart's NATS.
func operatorWorkloads(ctx context.Context, kc *kube.Client, statefulSets bool) ([]check.Workload, error) {
	sel := kube.LabelPartOf + "=" + kube.PartOfOperator
	if statefulSets {
		list, err := kc.Kube.AppsV1().StatefulSets(kc.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel + "," + kube.LabelComponent + "=nats"})
		if err != nil {
			return nil, fmt.Errorf("list the NATS StatefulSet in %s: %w", kc.Namespace, err)
		}
		var out []check.Workload
		for _, s := range list.Items {
			out = append(out, check.Workload{Name: "statefulset/" + s.Name, Component: "nats", Desired: replicas(s.Spec.Replicas), Ready: s.Status.ReadyReplicas})
		}
		return out, nil
	}
	list, err := kc.Kube.AppsV1().Deployments(kc.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list the operator's Deployments in %s: %w", kc.Namespace, err)
	}
	var out []check.Workload
	for _, d := range list.Items {
		out = append(out, deploymentWorkload(&d))
	}
	return out, nil
}

func deploymentWorkload(d *appsv1.Deployment) check.Workload {
	return check.Workload{Name: "deployment/" + d.Name, Component: d.Labels[kube.LabelComponent], Desired: replicas(d.Spec.Replicas), Ready: d.Status.ReadyReplicas}
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

func leases(ctx context.Context, kc *kube.Client) []check.Lease {
	var out []check.Lease
	for _, b := range leaderBinaries {
		l := check.Lease{Name: v1alpha1.LeaseName(b)}
		got, err := kc.Kube.CoordinationV1().Leases(kc.Namespace).Get(ctx, l.Name, metav1.GetOptions{})
		if err == nil {
			l.Found = true
			if got.Spec.HolderIdentity != nil {
				l.Holder = *got.Spec.HolderIdentity
			}
			if got.Spec.RenewTime != nil {
				l.Renewed = got.Spec.RenewTime.Time
			}
			if got.Spec.LeaseDurationSeconds != nil {
				l.Duration = time.Duration(*got.Spec.LeaseDurationSeconds) * time.Second
			}
		} else if !apierrors.IsNotFound(err) {
			l.Err = err
		}
		out = append(out, l)
	}
	return out
}

func argoFacts(ctx context.Context, kc *kube.Client, engineNS string) check.ArgoCDFacts {
	f := check.ArgoCDFacts{SupportedPrefix: supportedArgoCD}
	f.Served, f.Err = servedResources(kc, argoapp.SchemeGroupVersion.String())
	// The application controller runs as a StatefulSet (or, sharded off, a Deployment).
	sel := "app.kubernetes.io/name=argocd-application-controller"
	if sets, err := kc.Kube.AppsV1().StatefulSets(engineNS).List(ctx, metav1.ListOptions{LabelSelector: sel}); err == nil && len(sets.Items) > 0 {
		f.Version = imageVersion(sets.Items[0].Spec.Template.Spec.Containers)
	} else if deps, err := kc.Kube.AppsV1().Deployments(engineNS).List(ctx, metav1.ListOptions{LabelSelector: sel}); err == nil && len(deps.Items) > 0 {
		f.Version = imageVersion(deps.Items[0].Spec.Template.Spec.Containers)
	}
	if rt, err := kc.Runtime(ctx); err == nil {
		for _, c := range rt.Status.Conditions {
			if c.Type == v1alpha1.ConditionEngineAvailable {
				f.EngineStatus, f.EngineReason, f.EngineMessage = string(c.Status), c.Reason, c.Message
			}
		}
	}
	return f
}

func imageVersion(cs []corev1.Container) string {
	if len(cs) == 0 {
		return ""
	}
	image := cs[0].Image
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if colon := strings.LastIndex(image, ":"); colon > strings.LastIndex(image, "/") {
		return image[colon+1:]
	}
	return ""
}

// repoCredsFacts reads the repo-creds Secret and asks the registry, with its credentials, for a
// blob of the repository its URL names: any answer but 401/403 means the login is accepted.
func repoCredsFacts(ctx context.Context, kc *kube.Client, engineNS, name string) check.RepoCredsFacts {
	f := check.RepoCredsFacts{Namespace: engineNS, Name: name}
	sec, err := kc.Kube.CoreV1().Secrets(engineNS).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return f
	case err != nil:
		f.Err = err
		return f
	}
	f.Found = true
	f.Label = sec.Labels[v1alpha1.LabelArgoSecretType]
	f.URL = string(sec.Data["url"])
	user, pass := string(sec.Data["username"]), string(sec.Data["password"])
	f.HasUsername, f.HasPassword = user != "", pass != ""
	if f.URL == "" || !f.HasUsername || !f.HasPassword {
		return f
	}
	repo, err := ociregistry.ParseRepository(strings.TrimSuffix(strings.TrimPrefix(f.URL, "oci://"), "/"))
	if err != nil {
		f.Probe = fmt.Errorf("data.url %q: %w", f.URL, err)
		return f
	}
	client := ociregistry.New(ociregistry.Options{
		PlainHTTP:   string(sec.Data["insecureOCIForceHttp"]) == "true",
		Credentials: ociregistry.Credentials{Username: user, Password: pass},
		UserAgent:   Name,
	})
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = client.BlobExists(pctx, repo, ociregistry.Digest(nil))
	if err != nil && !errors.Is(err, ociregistry.ErrNotFound) {
		f.Probe = err
		f.Unauthorized = errors.Is(err, ociregistry.ErrUnauthorized)
	}
	return f
}
