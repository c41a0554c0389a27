package rules

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// Rule names: the metrics label and the audit record's rule.
const (
	// RuleApplicationFinalizer denies the operator's writes to an Application that carries Argo
	// CD's resources finalizer outside a Remove step in progress: without the delete-rollout
	// annotation, or with one that names a rollout not removing the release.
	RuleApplicationFinalizer = "application-finalizer"
	// RuleApplicationManagedBy warns a person who writes an Application labelled as the
	// operator's. It never denies.
	RuleApplicationManagedBy = "application-managed-by"
	// RuleRolloutApproval guards spec.approval of a RuntimeRollout.
	RuleRolloutApproval = "rollout-approval"
	// RuleRuntimeName requires the ClusterRuntime to be named cluster.
	RuleRuntimeName = "runtime-name"
	// RuleRuntimeSpecOwner keeps the operator's identities from writing a ClusterRuntime's spec.
	RuleRuntimeSpecOwner = "runtime-spec-owner"
	// RuleRuntimeResolves requires a ClusterRuntime's spec to resolve into a plan.
	RuleRuntimeResolves = "runtime-resolves"
	// RuleRuntimeFinalizer lets only the operator add or remove its cleanup finalizer.
	RuleRuntimeFinalizer = "runtime-finalizer"
	// RulePlanImmutable keeps a plan ConfigMap's content and identity from changing.
	RulePlanImmutable = "plan-immutable"
	// RulePlanDelete lets only the operator delete a plan ConfigMap.
	RulePlanDelete = "plan-delete"
	// RuleDecode denies a request whose object cannot be read (fail closed).
	RuleDecode = "decode"
)

// Violation is one reason to deny: the field path and what is wrong and what is accepted.
type Violation struct {
	// Rule is the rule that found it (a Rule* constant).
	Rule string
	// Field is the offending field path, such as "spec.overrides[2].path"; empty when the
	// request as a whole is refused (a deletion).
	Field string
	// Message says what is wrong and what would be accepted.
	Message string
}

// String is "field: message", or the message alone when there is no field.
func (v Violation) String() string {
	if v.Field == "" {
		return v.Message
	}
	return v.Field + ": " + v.Message
}

// Decision is the outcome of one request: allowed when it has no violations.
type Decision struct {
	// Violations deny the request; each becomes a cause of the response status.
	Violations []Violation
	// Warnings are returned to the client whether or not the request is allowed.
	Warnings []string
	// WarningRules name the rules behind Warnings (metrics), in the same order.
	WarningRules []string
	// Code is the HTTP code of a denial: 403, or 400 when the object could not be read.
	Code int32
}

// Allowed reports whether the request may proceed.
func (d Decision) Allowed() bool { return len(d.Violations) == 0 }

// Rule is the rule of the first violation ("" when allowed).
func (d Decision) Rule() string {
	if len(d.Violations) == 0 {
		return ""
	}
	return d.Violations[0].Rule
}

// Field is the field path of the first violation.
func (d Decision) Field() string {
	if len(d.Violations) == 0 {
		return ""
	}
	return d.Violations[0].Field
}

// Message is every violation as "field: message", joined with "; ".
func (d Decision) Message() string {
	parts := make([]string, len(d.Violations))
	for i, v := range d.Violations {
		parts[i] = v.String()
	}
	return strings.Join(parts, "; ")
}

func (d *Decision) deny(rule, field, format string, args ...any) {
	d.Violations = append(d.Violations, Violation{Rule: rule, Field: field, Message: fmt.Sprintf(format, args...)})
	if d.Code == 0 {
		d.Code = http.StatusForbidden
	}
}

func (d *Decision) warn(rule, format string, args ...any) {
	d.Warnings = append(d.Warnings, fmt.Sprintf(format, args...))
	d.WarningRules = append(d.WarningRules, rule)
}

// undecodable is the decision for an object the webhook cannot read: deny, fail closed.
func undecodable(what string, err error) Decision {
	return Decision{
		Violations: []Violation{{Rule: RuleDecode, Message: fmt.Sprintf("cannot read the %s in the request: %v", what, err)}},
		Code:       http.StatusBadRequest,
	}
}

// RolloutGetter reads one RuntimeRollout from the API server (a missing one is an apierrors
// NotFound); the Application rule checks a delete-rollout marker through it.
type RolloutGetter interface {
	GetRollout(ctx context.Context, name string) (*v1alpha1.RuntimeRollout, error)
}

// ConfigMapGetter reads one ConfigMap; the ClusterRuntime rule reads the bundle through it.
type ConfigMapGetter interface {
	GetConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
}

// Config configures the rules.
type Config struct {
	// OperatorIdentities are the usernames of the operator's service accounts.
	OperatorIdentities []string
	// Namespace is the operator namespace: plans live there, and it is a bundle ConfigMap's
	// namespace when the runtime names none.
	Namespace string
	// EngineNamespace is Argo CD's namespace: the operator's Applications live there.
	EngineNamespace string
	// Bundles reads the bundle ConfigMap a ClusterRuntime names.
	Bundles ConfigMapGetter
	// Rollouts reads the RuntimeRollout an Application's delete-rollout marker names; nil
	// approves no marker.
	Rollouts RolloutGetter
	// Clock is the time an approval's expiry is compared with.
	Clock clock.PassiveClock
}

// Validator applies the rules to AdmissionRequests. It is safe for concurrent use.
type Validator struct {
	cfg      Config
	operator map[string]bool
}

// New returns a Validator; a nil Clock means the real clock.
func New(cfg Config) *Validator {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	v := &Validator{cfg: cfg, operator: map[string]bool{}}
	for _, id := range cfg.OperatorIdentities {
		if id = strings.TrimSpace(id); id != "" {
			v.operator[id] = true
		}
	}
	return v
}

// IsOperator reports whether username is one of the operator's identities.
func (v *Validator) IsOperator(username string) bool { return v.operator[username] }

// Resources the rules apply to.
const (
	groupArgo     = "argoproj.io"
	groupOperator = v1alpha1.Group
)

// Validate decides one request. Requests for other resources, and for subresources (status),
// are allowed: the webhook configuration does not send them.
func (v *Validator) Validate(ctx context.Context, req *admissionv1.AdmissionRequest) Decision {
	if req.SubResource != "" {
		return Decision{}
	}
	switch {
	case req.Resource.Group == groupArgo && req.Resource.Resource == "applications":
		return v.application(ctx, req)
	case req.Resource.Group == groupOperator && req.Resource.Resource == "runtimerollouts":
		return v.rollout(req)
	case req.Resource.Group == groupOperator && req.Resource.Resource == "clusterruntimes":
		return v.runtime(ctx, req)
	case req.Resource.Group == "" && req.Resource.Resource == "configmaps":
		return v.planConfigMap(req)
	default:
		return Decision{}
	}
}

// who names the requesting user for a message.
func who(req *admissionv1.AdmissionRequest) string {
	if req.UserInfo.Username == "" {
		return "an anonymous user"
	}
	return fmt.Sprintf("%q", req.UserInfo.Username)
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
