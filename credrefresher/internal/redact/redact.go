// Package redact removes credentials from text before it reaches a log line, an error, a
// published status or a metric label. It knows the secrets it was told about and, as a second
// line of defence, hides any long opaque run of token characters (ECR passwords are kilobytes of
// base64), so that an error body echoing a token we never saw is hidden too.
package redact

import (
	"regexp"
	"sort"
	"strings"
	"sync"
)

// Mask replaces every hidden value.
const Mask = "[redacted]"

// maxKnown bounds the remembered secrets: the current token and a few before it are enough to
// catch a server echoing a recent one.
const maxKnown = 8

// opaqueRun matches 40 or more characters of the standard base64 alphabet (which covers hex)
// without a separator: the shape of an ECR token or password. ARNs, hosts and messages break
// into shorter runs at ':', '-', '.' and spaces.
var opaqueRun = regexp.MustCompile(`[A-Za-z0-9+/=]{40,}`)

// Redactor hides known secrets and token-shaped runs. The zero value is ready; it is safe for
// concurrent use.
type Redactor struct {
	mu    sync.Mutex
	known []string
}

// Add remembers secrets to hide from now on. Empty and very short values are ignored: hiding
// "a" would mangle every message while protecting nothing.
func (r *Redactor) Add(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range secrets {
		if len(s) < 4 {
			continue
		}
		r.known = append(r.known, s)
	}
	if n := len(r.known); n > maxKnown {
		r.known = append([]string(nil), r.known[n-maxKnown:]...)
	}
}

// String returns s with every known secret and every token-shaped run replaced by Mask.
func (r *Redactor) String(s string) string {
	if r != nil {
		r.mu.Lock()
		known := append([]string(nil), r.known...)
		r.mu.Unlock()
		// longest first, so that a secret containing another (the base64 token contains no
		// password, but a caller may add both forms) is hidden whole
		sort.Slice(known, func(i, j int) bool { return len(known[i]) > len(known[j]) })
		for _, k := range known {
			s = strings.ReplaceAll(s, k, Mask)
		}
	}
	return opaqueRun.ReplaceAllString(s, Mask)
}

// Error returns err's text redacted ("" for nil).
func (r *Redactor) Error(err error) string {
	if err == nil {
		return ""
	}
	return r.String(err.Error())
}
