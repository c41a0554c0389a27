package appspec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/plan"
)

// Defaults of the installation values.
const (
	// DefaultProject is engine.project.
	DefaultProject = "aicr"
	// InClusterServer is the destination server of every Application.
	InClusterServer = "https://kubernetes.default.svc"
	// StepInfoName is the name of the operation info entry that carries the step token of an
	// explicit sync (v1alpha1.StepToken: the step ID and its rollout's UID), so readiness can
	// tell our sync of this step from any other, a namesake rollout's included.
	StepInfoName = "aicr-step"
)

// Settings are the installation values the Application depends on.
type Settings struct {
	// EngineNamespace is engine.namespace: where Applications live.
	EngineNamespace string
	// Project is engine.project.
	Project string
	// Repository is registry.repository, with or without the oci:// scheme.
	Repository string
}

// Validate names the setting at fault.
func (s Settings) Validate() error {
	switch {
	case s.EngineNamespace == "":
		return fmt.Errorf("engine namespace is required")
	case s.Project == "":
		return fmt.Errorf("engine project is required")
	case strings.TrimPrefix(s.Repository, "oci://") == "" || strings.HasSuffix(s.Repository, "/"):
		return fmt.Errorf("registry repository %q: use host[:port]/path without a trailing slash, such as registry.example.com/aicr", s.Repository)
	case strings.Contains(strings.TrimPrefix(s.Repository, "oci://"), "://"):
		return fmt.Errorf("registry repository %q: only oci:// is supported", s.Repository)
	}
	return nil
}

// Input is what one write renders.
type Input struct {
	// Runtime is the ClusterRuntime's name; RuntimeUID its UID.
	Runtime    string
	RuntimeUID string
	// PlanDigest is the plan the release comes from.
	PlanDigest string
	// Release is the plan release.
	Release *plan.Release
	// StepID and StepStarted identify the step that writes (empty for a preview);
	// StepRolloutUID is the UID of the step's rollout (empty for a repair).
	StepID         string
	StepStarted    time.Time
	StepRolloutUID string
	// StepSeq is the command's ordering token (bus.StepRef.Seq), written as
	// operator.aicr.run/step-seq when set.
	StepSeq string
	// SuspendEngine writes automated sync off.
	SuspendEngine bool
}

// RepoURL is the OCI repository URL of a chart path under the registry repository.
func RepoURL(repository, chartPath string) string {
	return "oci://" + strings.TrimPrefix(repository, "oci://") + "/" + chartPath
}

// IgnoreDifferences are the comparison exceptions AICR's releases need (engine policy
// argocd.v2): written on each Application, never in argocd-cm.
func IgnoreDifferences() argoapp.IgnoreDifferences {
	return argoapp.IgnoreDifferences{
		{Kind: "Secret", Name: "kubeflow-trainer-webhook-cert", JSONPointers: []string{"/data"}},
		{Kind: "Secret", Name: "jobset-webhook-server-cert", JSONPointers: []string{"/data"}},
		{Group: "storage.k8s.io", Kind: "CSIDriver", JSONPointers: []string{"/spec/preventPodSchedulingIfMissing"}},
	}
}

// SyncOptions are the sync options of every Application, and of every explicit sync operation
// (an operation does not inherit the spec's).
func SyncOptions() argoapp.SyncOptions {
	return argoapp.SyncOptions{"ServerSideApply=true", "RespectIgnoreDifferences=true"}
}

// Retry is the retry strategy of every Application.
func Retry() *argoapp.RetryStrategy {
	factor := int64(2)
	return &argoapp.RetryStrategy{Limit: 3, Backoff: &argoapp.Backoff{Duration: "30s", Factor: &factor, MaxDuration: "5m"}}
}

// Build renders the Application for one release. The result carries no status, no operation,
// no finalizers and no refresh annotation: it is the manifest the applier applies.
func Build(s Settings, in Input) (*argoapp.Application, error) {
	if in.Release == nil {
		return nil, fmt.Errorf("build application: no release")
	}
	r := in.Release
	values, err := r.ValuesJSON()
	if err != nil {
		return nil, fmt.Errorf("build application %s: %w", r.Name, err)
	}
	yes := true
	enabled := !in.SuspendEngine
	annotations := map[string]string{
		v1alpha1.AnnotationRuntimeUID: in.RuntimeUID,
		v1alpha1.AnnotationPlanDigest: in.PlanDigest,
		v1alpha1.AnnotationReleaseID:  r.Name,
		v1alpha1.AnnotationDependsOn:  strings.Join(r.DependsOn, ","),
	}
	if in.StepID != "" {
		annotations[v1alpha1.AnnotationStep] = in.StepID
		annotations[v1alpha1.AnnotationStepStarted] = in.StepStarted.UTC().Format(time.RFC3339)
		if in.StepRolloutUID != "" {
			annotations[v1alpha1.AnnotationStepRolloutUID] = in.StepRolloutUID
		}
		if in.StepSeq != "" {
			annotations[v1alpha1.AnnotationStepSeq] = in.StepSeq
		}
	}
	if r.ReadinessGate {
		annotations[v1alpha1.AnnotationReadinessGate] = "true"
	}
	if in.SuspendEngine {
		annotations[v1alpha1.AnnotationEngineSuspended] = "true"
	}
	app := &argoapp.Application{
		TypeMeta: metav1.TypeMeta{APIVersion: "argoproj.io/v1alpha1", Kind: "Application"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      r.Name,
			Namespace: s.EngineNamespace,
			Labels: map[string]string{
				v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
				v1alpha1.LabelRuntime:   in.Runtime,
			},
			Annotations: annotations,
		},
		Spec: argoapp.ApplicationSpec{
			Project: s.Project,
			Source: &argoapp.ApplicationSource{
				RepoURL:        RepoURL(s.Repository, r.Chart.Path),
				Path:           ".",
				TargetRevision: r.Chart.Digest,
				Helm:           &argoapp.ApplicationSourceHelm{ValuesObject: &runtime.RawExtension{Raw: values}},
			},
			Destination: argoapp.ApplicationDestination{Server: InClusterServer, Namespace: r.Namespace},
			SyncPolicy: &argoapp.SyncPolicy{
				Automated:   &argoapp.SyncPolicyAutomated{Enabled: &enabled, Prune: &yes, SelfHeal: &yes},
				Retry:       Retry(),
				SyncOptions: SyncOptions(),
			},
			IgnoreDifferences: IgnoreDifferences(),
		},
	}
	return app, nil
}

// SyncOperation is the explicit sync a readiness release gets in each of its steps: initiated by
// aicr-operator, with the spec's sync options stated (an operation does not inherit them), and
// the step token (v1alpha1.StepToken) in its info so readiness can recognise it.
func SyncOperation(app *argoapp.Application, token string) *argoapp.Operation {
	return &argoapp.Operation{
		Sync: &argoapp.SyncOperation{
			Revision:     app.Spec.Source.TargetRevision,
			Prune:        true,
			SyncOptions:  SyncOptions(),
			SyncStrategy: &argoapp.SyncStrategy{Hook: &argoapp.SyncStrategyHook{}},
		},
		InitiatedBy: argoapp.OperationInitiator{Username: v1alpha1.FieldManager},
		Info:        []*argoapp.Info{{Name: StepInfoName, Value: token}},
		Retry:       *Retry(),
	}
}

// HasStepInfo reports whether an operation's info carries aicr-step=<token> (a
// v1alpha1.StepToken): the explicit sync SyncOperation wrote for that step.
func HasStepInfo(info []*argoapp.Info, token string) bool {
	return slices.ContainsFunc(info, func(i *argoapp.Info) bool {
		return i != nil && i.Name == StepInfoName && i.Value == token
	})
}

// EqualSource reports whether two sources are the same chart, revision and values (values
// compared as JSON, so key order and number spelling do not matter).
func EqualSource(a, b *argoapp.ApplicationSource) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.RepoURL != b.RepoURL || a.Path != b.Path || a.TargetRevision != b.TargetRevision || a.Chart != b.Chart {
		return false
	}
	return equalJSON(valuesOf(a), valuesOf(b))
}

// EqualDestination reports whether two destinations are the same.
func EqualDestination(a, b argoapp.ApplicationDestination) bool {
	return a.Server == b.Server && a.Namespace == b.Namespace && a.Name == b.Name
}

func valuesOf(s *argoapp.ApplicationSource) []byte {
	if s.Helm == nil || s.Helm.ValuesObject == nil || len(s.Helm.ValuesObject.Raw) == 0 {
		return []byte("{}")
	}
	return s.Helm.ValuesObject.Raw
}

// EqualValues reports whether two Helm values documents are the same values: equal as JSON, so
// key order and number spelling do not matter (what EqualSource compares of the values).
func EqualValues(a, b []byte) bool { return equalJSON(a, b) }

func equalJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	x, errX := decodeJSON(a)
	y, errY := decodeJSON(b)
	return errX == nil && errY == nil && equalValue(x, y)
}

// decodeJSON decodes one JSON value keeping numbers as written (json.Number): through float64,
// integers above 2^53 that differ would compare equal.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the value")
	}
	return v, nil
}

// equalValue compares decoded JSON: mappings by key, lists in order, numbers by value whatever
// their spelling (1, 1.0 and 1e0 are equal).
func equalValue(x, y any) bool {
	switch xv := x.(type) {
	case map[string]any:
		yv, ok := y.(map[string]any)
		if !ok || len(xv) != len(yv) {
			return false
		}
		for k, v := range xv {
			w, ok := yv[k]
			if !ok || !equalValue(v, w) {
				return false
			}
		}
		return true
	case []any:
		yv, ok := y.([]any)
		if !ok || len(xv) != len(yv) {
			return false
		}
		for i := range xv {
			if !equalValue(xv[i], yv[i]) {
				return false
			}
		}
		return true
	case json.Number:
		yv, ok := y.(json.Number)
		if !ok {
			return false
		}
		if xv == yv {
			return true
		}
		// 256 bits hold every integer Kubernetes or Helm can carry exactly; the exponent of
		// a big.Float keeps 1e400 finite without materialising its digits.
		fx, _, errX := big.ParseFloat(string(xv), 10, 256, big.ToNearestEven)
		fy, _, errY := big.ParseFloat(string(yv), 10, 256, big.ToNearestEven)
		return errX == nil && errY == nil && fx.Cmp(fy) == 0
	default: // string, bool, nil
		return x == y
	}
}
