package v1alpha1

import (
	"strconv"
	"strings"
)

// RepairIDPrefix starts the ID of a drift repair, "repair/<plan digest hex prefix>/<tag>",
// which is no rollout's step.
const RepairIDPrefix = "repair/"

// StepID is a rollout's step ID, "<rollout>/<index>": what commands, results, verdicts and the
// AnnotationStep of an Application carry.
func StepID(rollout string, index int32) string {
	return rollout + "/" + strconv.Itoa(int(index))
}

// ParseStepID splits a step ID. ok is false for a repair ID or anything malformed.
func ParseStepID(id string) (rollout string, index int32, ok bool) {
	i := strings.LastIndexByte(id, '/')
	if i <= 0 || strings.HasPrefix(id, RepairIDPrefix) {
		return "", 0, false
	}
	n, err := strconv.ParseInt(id[i+1:], 10, 32) // an index past int32 is no step's
	if err != nil || n < 1 || strings.Contains(id[:i], "/") {
		return "", 0, false
	}
	return id[:i], int32(n), true
}
