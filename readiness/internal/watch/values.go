package watch

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/aicr-run/aicr-operator/shared/appspec"
	"github.com/aicr-run/aicr-operator/shared/argoapp"
)

// Readiness keeps each watched Application's Helm values as a digest, not as the values. A
// GPU stack's values are about 13 KiB a release, and the managedFields entry of the
// operator's apply names every one of their keys again: with the values the informer held
// about 27 KiB per Application, 270 MB at 10 000 (docs/performance.md). What the fences and
// drift detection ask of the values is whether two copies are the same: the spec's and Argo
// CD's copies in the status (comparedTo, the sync result, the operation), and the spec's and
// the plan's. A digest answers that when the bytes agree, which they do unless someone
// spells the same values differently (1.0 for 1), and then the Application is read again
// from the API server and compared whole (Watcher.sameValues). Where they differ, drift
// detection needs the values themselves to name the fields, and reads the Application again
// (Watcher.fullDrift).

// digestPrefix starts a values digest. A digest is a JSON string, so it is valid JSON wherever
// the values were (spec.source.helm.valuesObject), and no Application's values can be one:
// valuesObject is an object.
const digestPrefix = `"aicr.run/values-sha256:`

// valuesPath is the field path of the Helm values under the spec.
const valuesPath = ".spec.source.helm.valuesObject"

// isDigest reports whether raw is a values digest (valuesDigest), not values.
func isDigest(raw []byte) bool { return bytes.HasPrefix(raw, []byte(digestPrefix)) }

// valuesDigest is the digest standing for the values raw: SHA-256 of their JSON with the
// HTML-safe escapes spelled out (normalized). The API server writes '<', '>' and '&' in
// strings as \u003c, \u003e and \u0026; a plan's canonical JSON writes them as they are.
func valuesDigest(raw []byte) []byte {
	h := sha256.New()
	normalized(h, raw)
	out := make([]byte, 0, len(digestPrefix)+2*sha256.Size+1)
	out = append(out, digestPrefix...)
	out = hex.AppendEncode(out, h.Sum(nil))
	return append(out, '"')
}

// normalized writes raw to h with every \u003c, \u003e and \u0026 escape (any case of hex
// digits) written as the character it stands for. It follows escapes as JSON does: the
// characters after an escaped backslash are text, not the start of an escape.
func normalized(h hash.Hash, raw []byte) {
	from := 0
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			continue
		}
		if raw[i+1] != 'u' || i+5 >= len(raw) {
			i++ // \" \\ \n ...: the escaped character is no escape's start
			continue
		}
		var c byte
		switch strings.ToLower(string(raw[i+2 : i+6])) {
		case "003c":
			c = '<'
		case "003e":
			c = '>'
		case "0026":
			c = '&'
		default:
			i += 5
			continue
		}
		h.Write(raw[from:i])
		h.Write([]byte{c})
		i += 5
		from = i + 1
	}
	h.Write(raw[from:])
}

// digestValues replaces the Helm values of app's spec, and Argo CD's copies of them in the
// status, with digests: a copy that holds the same values as the spec (the same JSON, or
// another spelling of it) shares the spec's digest, any other gets its own. It also cuts the
// values' keys out of the managedFields entries (collapseValuesFields). An Application without
// values in its spec is left as it is.
func digestValues(app *argoapp.Application) {
	src := app.Spec.Source
	if src == nil || src.Helm == nil || src.Helm.ValuesObject == nil || len(src.Helm.ValuesObject.Raw) == 0 || isDigest(src.Helm.ValuesObject.Raw) {
		return
	}
	values := src.Helm.ValuesObject
	spec := &runtime.RawExtension{Raw: valuesDigest(values.Raw)}
	copyOf := func(s *argoapp.ApplicationSource) {
		if s == nil || s.Helm == nil || s.Helm.ValuesObject == nil || len(s.Helm.ValuesObject.Raw) == 0 {
			return
		}
		raw := s.Helm.ValuesObject.Raw
		if bytes.Equal(raw, values.Raw) {
			s.Helm.ValuesObject = spec
			return
		}
		d := valuesDigest(raw)
		if bytes.Equal(d, spec.Raw) || appspec.EqualValues(raw, values.Raw) {
			s.Helm.ValuesObject = spec
			return
		}
		s.Helm.ValuesObject = &runtime.RawExtension{Raw: d}
	}
	copyOf(&app.Status.Sync.ComparedTo.Source)
	if os := app.Status.OperationState; os != nil {
		if os.SyncResult != nil {
			copyOf(&os.SyncResult.Source)
		}
		if os.Operation.Sync != nil {
			copyOf(os.Operation.Sync.Source)
		}
	}
	if op := app.Operation; op != nil && op.Sync != nil {
		copyOf(op.Sync.Source)
	}
	src.Helm.ValuesObject = spec
	for i := range app.ManagedFields {
		app.ManagedFields[i].FieldsV1 = collapseValuesFields(app.ManagedFields[i].FieldsV1)
	}
}

// collapseValuesFields returns the field set f with the values' keys cut:
// f:spec.f:source.f:helm.f:valuesObject becomes a leaf. Drift detection reads the values'
// fields of an entry only where the values differ from the plan's, and then it reads the
// Application again (Watcher.fullDrift). A set without values fields is returned as it is.
func collapseValuesFields(f *metav1.FieldsV1) *metav1.FieldsV1 {
	if f == nil || !bytes.Contains(f.Raw, []byte(`"f:valuesObject"`)) {
		return f
	}
	raw, err := collapse(f.Raw, "f:spec", "f:source", "f:helm", "f:valuesObject")
	if err != nil {
		return f
	}
	return &metav1.FieldsV1{Raw: raw}
}

// errNoPath: the field set has no member at the path collapse follows.
var errNoPath = errors.New("no such member")

// collapse returns the JSON object raw with the member at path (object keys, one per level)
// replaced by {}, in one copy of raw: the informer runs it on every event, and decoding each
// level into a map and encoding it again made as much garbage as decoding the Application. raw
// that is not JSON is an error.
// Keys are matched as they are written (a field set's keys carry no escapes where the path
// goes). An empty path is the object itself.
func collapse(raw []byte, path ...string) ([]byte, error) {
	// The walk below reads only up to the member it cuts; what follows it is copied unread, so
	// a field set that is not JSON as a whole is refused here (json.Valid allocates nothing).
	if !json.Valid(raw) {
		return nil, errors.New("field set: not JSON")
	}
	start, end := 0, len(raw)
	for _, key := range path {
		s, e, err := member(raw[:end], start, key)
		if err != nil {
			return nil, err
		}
		start, end = s, e
	}
	out := make([]byte, 0, len(raw)-(end-start)+2)
	out = append(out, raw[:start]...)
	out = append(out, '{', '}')
	return append(out, raw[end:]...), nil
}

// member returns the span of the value of key in the JSON object that starts at raw[i]
// (whitespace before it skipped).
func member(raw []byte, i int, key string) (int, int, error) {
	i = skipSpace(raw, i)
	if i >= len(raw) || raw[i] != '{' {
		return 0, 0, errors.New("field set: want an object")
	}
	i++
	for {
		i = skipSpace(raw, i)
		if i < len(raw) && raw[i] == '}' {
			return 0, 0, errNoPath
		}
		ks := i
		ke, err := skipValue(raw, i)
		if err != nil {
			return 0, 0, err
		}
		if raw[ks] != '"' {
			return 0, 0, errors.New("field set: want a key")
		}
		i = skipSpace(raw, ke)
		if i >= len(raw) || raw[i] != ':' {
			return 0, 0, errors.New("field set: want a colon")
		}
		vs := skipSpace(raw, i+1)
		ve, err := skipValue(raw, vs)
		if err != nil {
			return 0, 0, err
		}
		if string(raw[ks+1:ke-1]) == key {
			return vs, ve, nil
		}
		i = skipSpace(raw, ve)
		switch {
		case i < len(raw) && raw[i] == ',':
			i++
		case i < len(raw) && raw[i] == '}':
			return 0, 0, errNoPath
		default:
			return 0, 0, errors.New("field set: want a comma or the object's end")
		}
	}
}

// skipValue returns the end of the JSON value that starts at raw[i].
func skipValue(raw []byte, i int) (int, error) {
	if i >= len(raw) {
		return 0, errors.New("field set: unexpected end")
	}
	switch raw[i] {
	case '"':
		for j := i + 1; j < len(raw); j++ {
			switch raw[j] {
			case '\\':
				j++
			case '"':
				return j + 1, nil
			}
		}
		return 0, errors.New("field set: unterminated string")
	case '{', '[':
		depth := 0
		for j := i; j < len(raw); j++ {
			switch raw[j] {
			case '"':
				e, err := skipValue(raw, j)
				if err != nil {
					return 0, err
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errors.New("field set: unterminated object or array")
	}
	j := i
	for j < len(raw) && !strings.ContainsRune(",}] \t\r\n", rune(raw[j])) {
		j++
	}
	if j == i {
		return 0, errors.New("field set: want a value")
	}
	return j, nil
}

func skipSpace(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\r' || raw[i] == '\n') {
		i++
	}
	return i
}

// touchesValues reports whether a drift field path is the values, inside them, or above them:
// a drift whose fields and managers are named from the values, which a cached Application no
// longer holds.
func touchesValues(fields []string) bool {
	for _, f := range fields {
		if f == valuesPath || strings.HasPrefix(f, valuesPath+".") || strings.HasPrefix(valuesPath, f+".") {
			return true
		}
	}
	return false
}

// valuesOf returns the Helm values of s as they are held (values, or a digest), or nil.
func valuesOf(s *argoapp.ApplicationSource) []byte {
	if s != nil && s.Helm != nil && s.Helm.ValuesObject != nil {
		return s.Helm.ValuesObject.Raw
	}
	return nil
}
