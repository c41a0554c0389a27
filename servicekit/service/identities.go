package service

import (
	"fmt"
	"strings"
)

// SplitIdentities parses an --operator-identities value: Kubernetes user names, comma-separated
// (the chart passes system:serviceaccount:<namespace>:<name> for each binary). White space
// around a name and empty entries are dropped; a name with white space inside is an error that
// quotes it.
func SplitIdentities(value string) ([]string, error) {
	var ids []string
	for _, id := range strings.Split(value, ",") {
		id = strings.TrimSpace(id)
		if id == "" {
			continue
		}
		if strings.ContainsAny(id, " \t\r\n") {
			return nil, fmt.Errorf("--operator-identities: %q contains white space; use user names such as system:serviceaccount:aicr-system:aicr-operator-applier, comma-separated", id)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
