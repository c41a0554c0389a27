package v1alpha1

import "strings"

// CompareSeq orders two ordering tokens (bus.StepRef.Seq, AnnotationStepSeq): resourceVersions
// of RuntimeRollouts, which the API server hands out in increasing order for one resource (the
// comparison Kubernetes defines for them, k8s.io/apimachinery's
// resourceversion.CompareResourceVersion). It returns -1, 0 or +1 as a is before, equal to or
// after b; ok is false when either is not a well-formed token (empty, zero, leading zeros, not
// decimal digits), and the two cannot be ordered.
func CompareSeq(a, b string) (cmp int, ok bool) {
	if !wellFormedSeq(a) || !wellFormedSeq(b) {
		return 0, false
	}
	switch {
	case len(a) < len(b):
		return -1, true
	case len(a) > len(b):
		return 1, true
	}
	return strings.Compare(a, b), true
}

func wellFormedSeq(s string) bool {
	if s == "" || s[0] == '0' {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
