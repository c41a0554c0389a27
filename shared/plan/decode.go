package plan

import (
	"encoding/json"
	"errors"
	"unicode/utf16"
	"unicode/utf8"
)

// errSlowPath sends a document the fast decoder does not accept to encoding/json, which
// decodes it or reports the error it always reported.
var errSlowPath = errors.New("not decoded by the fast path")

// fastDecode decodes one JSON document into the values encoding/json produces with UseNumber
// (map[string]any, []any, json.Number, string, bool, nil). It is only a fast path: any input
// it does not accept (invalid JSON, trailing data) returns errSlowPath, and the caller decodes
// with encoding/json. Reflection-based decoding would dominate Resolve for large stacks.
//
// The document is copied into one string, and every key, number and string without escapes is
// a substring of it: a chart's values are mostly such strings, and allocating each one
// separately would be most of Resolve's allocations. The decoded values keep the copy alive, which
// is no more than the document's own size.
func fastDecode(data []byte) (any, error) {
	var d fastDecoder
	return d.decode(data)
}

// maxFastDepth bounds the fast path's recursion; deeper documents take the slow path, which
// enforces encoding/json's own limit.
const maxFastDepth = 1000

type fastDecoder struct {
	data string
	pos  int

	// ordered decodes mappings as *object (object.go) instead of map[string]any.
	ordered bool
	// stack holds the members of the mappings being read, innermost last.
	stack []member
	// arena and objs hand out the finished mappings' members and headers from a few large
	// allocations instead of one or two per mapping.
	arena []member
	objs  []object
}

// fastDecodeOrdered is fastDecode with every mapping an *object (object.go). It is only a fast
// path, like fastDecode.
func fastDecodeOrdered(data []byte) (any, error) {
	d := fastDecoder{ordered: true}
	return d.decode(data)
}

// decode decodes one document. A decoder may be kept for many (Resolve's values, one per
// component): its arena then serves them all.
func (d *fastDecoder) decode(data []byte) (any, error) {
	d.data, d.pos, d.stack = string(data), 0, d.stack[:0]
	d.skipSpace()
	v, ok := d.value(0)
	if !ok {
		return nil, errSlowPath
	}
	d.skipSpace()
	if d.pos != len(d.data) {
		return nil, errSlowPath
	}
	return v, nil
}

func (d *fastDecoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *fastDecoder) value(depth int) (any, bool) {
	if d.pos >= len(d.data) || depth > maxFastDepth {
		return nil, false
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		s, ok := d.string()
		return s, ok
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || ('0' <= c && c <= '9'):
		return d.number()
	}
	return nil, false
}

func (d *fastDecoder) literal(s string) bool {
	if len(d.data)-d.pos < len(s) || d.data[d.pos:d.pos+len(s)] != s {
		return false
	}
	d.pos += len(s)
	return true
}

// object reads a mapping's members onto the stack, then builds the map, or for the ordered
// decoding puts them in key order (the last of a repeated key kept) and moves them to the arena.
func (d *fastDecoder) object(depth int) (any, bool) {
	d.pos++ // {
	base := len(d.stack)
	defer func() { d.stack = d.stack[:base] }()
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return d.build(nil), true
	}
	for {
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, false
		}
		k, ok := d.string()
		if !ok {
			return nil, false
		}
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return nil, false
		}
		d.pos++
		d.skipSpace()
		v, ok := d.value(depth + 1)
		if !ok {
			return nil, false
		}
		d.stack = append(d.stack, member{k, v})
		d.skipSpace()
		if d.pos >= len(d.data) {
			return nil, false
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return d.build(d.stack[base:]), true
		default:
			return nil, false
		}
	}
}

// build makes the mapping of members read in document order.
func (d *fastDecoder) build(ms []member) any {
	if d.ordered {
		return d.finish(sortMembers(ms))
	}
	m := make(map[string]any, len(ms))
	for _, mb := range ms {
		m[mb.key] = mb.value // a repeated key: the last one wins, as in encoding/json
	}
	return m
}

// arenaChunk is how many members or mapping headers one allocation of the arena holds.
const arenaChunk = 256

// finish copies a mapping's sorted members into the arena and returns the mapping. Its members
// slice has no spare capacity, so inserting a key later (placement) copies it out of the
// arena instead of writing over the next mapping's members.
func (d *fastDecoder) finish(ms []member) *object {
	if len(d.objs) == cap(d.objs) {
		d.objs = make([]object, 0, arenaChunk)
	}
	d.objs = append(d.objs, object{})
	o := &d.objs[len(d.objs)-1]
	if len(ms) == 0 {
		return o
	}
	if cap(d.arena)-len(d.arena) < len(ms) {
		d.arena = make([]member, 0, max(arenaChunk, len(ms)))
	}
	start := len(d.arena)
	d.arena = append(d.arena, ms...)
	o.members = d.arena[start:len(d.arena):len(d.arena)]
	return o
}

func (d *fastDecoder) array(depth int) (any, bool) {
	d.pos++ // [
	l := []any{}
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return l, true
	}
	for {
		d.skipSpace()
		v, ok := d.value(depth + 1)
		if !ok {
			return nil, false
		}
		l = append(l, v)
		d.skipSpace()
		if d.pos >= len(d.data) {
			return nil, false
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case ']':
			d.pos++
			return l, true
		default:
			return nil, false
		}
	}
}

// number scans a JSON number and returns it as written.
func (d *fastDecoder) number() (any, bool) {
	start := d.pos
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		if ('0' <= c && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			d.pos++
			continue
		}
		break
	}
	s := d.data[start:d.pos]
	if !isNumber(s) {
		return nil, false
	}
	return json.Number(s), true
}

// string decodes a JSON string as encoding/json does: invalid UTF-8 and unpaired surrogates
// become U+FFFD.
func (d *fastDecoder) string() (string, bool) {
	d.pos++ // "
	start := d.pos
	// the common case: no escapes, ASCII or valid UTF-8
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		if c == '"' {
			s := d.data[start:d.pos]
			d.pos++
			return s, true
		}
		if c == '\\' || c < 0x20 {
			break
		}
		if c < utf8.RuneSelf {
			d.pos++
			continue
		}
		r, size := utf8.DecodeRuneInString(d.data[d.pos:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		d.pos += size
	}
	buf := append([]byte(nil), d.data[start:d.pos]...)
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			return string(buf), true
		case c < 0x20:
			return "", false
		case c == '\\':
			if d.pos+1 >= len(d.data) {
				return "", false
			}
			e := d.data[d.pos+1]
			d.pos += 2
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := d.hex4()
				if !ok {
					return "", false
				}
				if utf16.IsSurrogate(r) {
					var r2 rune
					if d.pos+1 < len(d.data) && d.data[d.pos] == '\\' && d.data[d.pos+1] == 'u' {
						save := d.pos
						d.pos += 2
						if x, ok := d.hex4(); ok {
							r2 = x
						} else {
							return "", false
						}
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							buf = utf8.AppendRune(buf, dec)
							continue
						}
						d.pos = save // not a pair: the second escape is read on its own
					}
					r = utf8.RuneError
				}
				buf = utf8.AppendRune(buf, r)
			default:
				return "", false
			}
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			d.pos++
		default:
			r, size := utf8.DecodeRuneInString(d.data[d.pos:])
			if r == utf8.RuneError && size == 1 {
				buf = utf8.AppendRune(buf, utf8.RuneError)
			} else {
				buf = append(buf, d.data[d.pos:d.pos+size]...)
			}
			d.pos += size
		}
	}
	return "", false
}

func (d *fastDecoder) hex4() (rune, bool) {
	if len(d.data)-d.pos < 4 {
		return 0, false
	}
	var r rune
	for _, c := range []byte(d.data[d.pos : d.pos+4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r*16 + rune(c)
	}
	d.pos += 4
	return r, true
}
