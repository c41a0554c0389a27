package plan

import (
	"errors"
	"fmt"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// Error is a user's bad input: the field path, what is wrong and what would be accepted. Reason
// is the Resolved condition reason the planner reports (a v1alpha1.Reason* constant).
type Error struct {
	// Reason is the condition reason, such as v1alpha1.ReasonBundleInvalid.
	Reason string
	// Field is the path of the offending field, such as "components[2].chart.digest" or
	// "spec.overrides[0].path".
	Field string
	// Message says what is wrong and what is accepted.
	Message string
}

// Error implements error.
func (e *Error) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// ReasonOf returns the Resolved reason of err: the Reason of a plan *Error, or
// v1alpha1.ReasonBundleInvalid for anything else.
func ReasonOf(err error) string {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Reason
	}
	return v1alpha1.ReasonBundleInvalid
}

func errorf(reason, field, format string, args ...any) *Error {
	return &Error{Reason: reason, Field: field, Message: fmt.Sprintf(format, args...)}
}

func bundleErr(field, format string, args ...any) *Error {
	return errorf(v1alpha1.ReasonBundleInvalid, field, format, args...)
}
