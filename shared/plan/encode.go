package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"
)

// The canonical form is what encoding/json writes for a Plan with SetEscapeHTML(false) (see
// Canonical). Encoding the values with reflection dominated Resolve for large stacks, so the
// plan is written here by hand, byte for byte the same: the digest test vector and
// TestCanonicalEncoderMatchesEncodingJSON hold it to that.

// appendCanonical appends the canonical JSON of p and returns, for each release, the offsets of
// its values within the result.
func (p *Plan) appendCanonical(dst []byte) ([]byte, [][2]int, error) {
	var e encoder
	dst = append(dst, `{"apiVersion":`...)
	dst = appendString(dst, p.APIVersion)
	dst = append(dst, `,"bundle":{"name":`...)
	dst = appendString(dst, p.Bundle.Name)
	dst = append(dst, `,"version":`...)
	dst = appendString(dst, p.Bundle.Version)
	dst = append(dst, `},"releases":`...)
	if p.Releases == nil {
		return append(dst, "null}"...), nil, nil
	}
	spans := make([][2]int, len(p.Releases))
	dst = append(dst, '[')
	for i := range p.Releases {
		r := &p.Releases[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"name":`...)
		dst = appendString(dst, r.Name)
		dst = append(dst, `,"namespace":`...)
		dst = appendString(dst, r.Namespace)
		dst = append(dst, `,"chart":{"path":`...)
		dst = appendString(dst, r.Chart.Path)
		dst = append(dst, `,"digest":`...)
		dst = appendString(dst, r.Chart.Digest)
		dst = append(dst, '}')
		if len(r.DependsOn) > 0 {
			dst = append(dst, `,"dependsOn":[`...)
			for j, d := range r.DependsOn {
				if j > 0 {
					dst = append(dst, ',')
				}
				dst = appendString(dst, d)
			}
			dst = append(dst, ']')
		}
		if r.ReadinessGate {
			dst = append(dst, `,"readinessGate":true`...)
		}
		dst = append(dst, `,"values":`...)
		start := len(dst)
		var err error
		switch {
		case r.tree != nil:
			if dst, err = e.appendMembers(dst, r.tree.members); err != nil { // Resolve's values
				return nil, nil, fmt.Errorf("values of %s: %w", r.Name, err)
			}
		case r.Values == nil && r.values != nil:
			dst = append(dst, r.values...) // a release of a sealed plan (Compose)
		case r.Values == nil:
			dst = append(dst, "null"...)
		default:
			if dst, err = e.appendObject(dst, r.Values); err != nil {
				return nil, nil, fmt.Errorf("values of %s: %w", r.Name, err)
			}
		}
		spans[i] = [2]int{start, len(dst)}
		dst = append(dst, '}')
	}
	return append(dst, "]}"...), spans, nil
}

// encoder keeps one stack of mapping members for a whole encoding, so sorting keys allocates
// once.
type encoder struct {
	members []member
}

// member is a mapping's key and value: sorting them together saves looking each value up
// again by its key.
type member struct {
	key   string
	value any
}

// appendValue appends the JSON of a decoded value as encoding/json writes it without HTML
// escaping: mapping keys sorted, json.Number as written.
func appendValue(dst []byte, v any) ([]byte, error) {
	var e encoder
	return e.appendValue(dst, v)
}

// appendObject appends the JSON of a mapping, keys sorted.
func appendObject(dst []byte, m map[string]any) ([]byte, error) {
	var e encoder
	return e.appendObject(dst, m)
}

func (e *encoder) appendValue(dst []byte, v any) ([]byte, error) {
	switch t := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return appendString(dst, t), nil
	case json.Number:
		if t == "" {
			return append(dst, '0'), nil
		}
		if !isNumber(string(t)) {
			return nil, fmt.Errorf("json: invalid number literal %q", string(t))
		}
		return append(dst, t...), nil
	case bool:
		return strconv.AppendBool(dst, t), nil
	case *object:
		return e.appendMembers(dst, t.members)
	case map[string]any:
		if t == nil {
			return append(dst, "null"...), nil
		}
		return e.appendObject(dst, t)
	case []any:
		if t == nil {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		for i, x := range t {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = e.appendValue(dst, x); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	default:
		// Not produced by decoding (float64, integers, structs...): encoding/json itself.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return nil, err
		}
		return append(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...), nil
	}
}

func (e *encoder) appendObject(dst []byte, m map[string]any) ([]byte, error) {
	base := len(e.members)
	for k, v := range m {
		e.members = append(e.members, member{k, v})
	}
	slices.SortFunc(e.members[base:], byKey)
	n := len(e.members) - base
	dst = append(dst, '{')
	for i := range n {
		if i > 0 {
			dst = append(dst, ',')
		}
		mb := e.members[base+i] // nested mappings push above base+n and pop before returning
		dst = appendString(dst, mb.key)
		dst = append(dst, ':')
		var err error
		if dst, err = e.appendValue(dst, mb.value); err != nil {
			e.members = e.members[:base]
			return nil, err
		}
	}
	e.members = e.members[:base]
	return append(dst, '}'), nil
}

// appendMembers appends the JSON of a mapping whose members are in key order (an *object).
func (e *encoder) appendMembers(dst []byte, ms []member) ([]byte, error) {
	dst = append(dst, '{')
	for i := range ms {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, ms[i].key)
		dst = append(dst, ':')
		var err error
		if dst, err = e.appendValue(dst, ms[i].value); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string exactly as encoding/json does with HTML escaping
// off: the two-character escapes for " \ \b \f \n \r \t, \u00XX for other control characters,
// U+FFFD for invalid UTF-8, and \u2028 and \u2029 escaped.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// isNumber reports whether s is a valid JSON number (as encoding/json checks json.Number).
func isNumber(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '-' {
		s = s[1:]
		if s == "" {
			return false
		}
	}
	switch {
	case s[0] == '0':
		s = s[1:]
	case '1' <= s[0] && s[0] <= '9':
		s = s[1:]
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	default:
		return false
	}
	if len(s) >= 2 && s[0] == '.' && '0' <= s[1] && s[1] <= '9' {
		s = s[2:]
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	if len(s) >= 2 && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		if s[0] == '+' || s[0] == '-' {
			s = s[1:]
			if s == "" {
				return false
			}
		}
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	return s == ""
}
