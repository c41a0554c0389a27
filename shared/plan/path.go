package plan

import (
	"fmt"
	"strconv"
	"strings"
)

// Segment is one step of a value path: a mapping key, or a list index when IsIndex.
type Segment struct {
	Key     string
	Index   int
	IsIndex bool
}

// String renders the segment as it is written in a path.
func (s Segment) String() string {
	if s.IsIndex {
		return "[" + strconv.Itoa(s.Index) + "]"
	}
	return s.Key
}

// ParsePath reads a dotted value path such as "driver.version", "labels[app.kubernetes.io/name]"
// or "containers[0].image". A key that contains a dot goes in brackets; a bracket holding only
// digits is a list index.
func ParsePath(path string) ([]Segment, error) {
	const accepted = `a dotted path such as driver.version; keys with dots go in brackets (labels[app.kubernetes.io/name]) and list items by index (containers[0])`
	if path == "" {
		return nil, fmt.Errorf("a path is required: %s", accepted)
	}
	var segs []Segment
	i := 0
	for i < len(path) {
		switch path[i] {
		case '[':
			end := strings.IndexByte(path[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("%q has an unclosed '[': %s", path, accepted)
			}
			inner := path[i+1 : i+end]
			if inner == "" {
				return nil, fmt.Errorf("%q has an empty '[]': %s", path, accepted)
			}
			if n, err := strconv.Atoi(inner); err == nil && n >= 0 && strconv.Itoa(n) == inner {
				segs = append(segs, Segment{Index: n, IsIndex: true})
			} else {
				segs = append(segs, Segment{Key: inner})
			}
			i += end + 1
			if i < len(path) {
				if path[i] == '.' {
					i++
					if i == len(path) {
						return nil, fmt.Errorf("%q ends with '.': %s", path, accepted)
					}
				} else if path[i] != '[' {
					return nil, fmt.Errorf("%q needs '.' or '[' after ']': %s", path, accepted)
				}
			}
		case '.', ']':
			return nil, fmt.Errorf("%q has an empty key or a stray %q: %s", path, path[i], accepted)
		default:
			j := i
			for j < len(path) && path[j] != '.' && path[j] != '[' && path[j] != ']' {
				j++
			}
			segs = append(segs, Segment{Key: path[i:j]})
			i = j
			if i < len(path) && path[i] == '.' {
				i++
				if i == len(path) {
					return nil, fmt.Errorf("%q ends with '.': %s", path, accepted)
				}
			}
		}
	}
	return segs, nil
}

func renderPath(segs []Segment) string {
	var b strings.Builder
	for i, s := range segs {
		switch {
		case s.IsIndex:
			b.WriteString(s.String())
		case strings.ContainsAny(s.Key, ".[]"):
			b.WriteString("[" + s.Key + "]")
		default:
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.Key)
		}
	}
	return b.String()
}

// replaceExisting sets the value at segs, which must already exist in root. On a missing
// segment it returns the path that exists and what could follow it.
func replaceExisting(root *object, segs []Segment, value any) error {
	var cur any = root
	for i, s := range segs {
		last := i == len(segs)-1
		switch node := cur.(type) {
		case *object:
			if s.IsIndex {
				return fmt.Errorf("%s is a mapping, not a list (keys: %s)", describeAt(segs[:i]), keysOf(node.keys()))
			}
			next, ok := node.get(s.Key)
			if !ok {
				return fmt.Errorf("%s has no key %q (keys: %s)", describeAt(segs[:i]), s.Key, keysOf(node.keys()))
			}
			if last {
				node.set(s.Key, value)
				return nil
			}
			cur = next
		case []any:
			if !s.IsIndex {
				return fmt.Errorf("%s is a list; address its items by index, such as [0]", describeAt(segs[:i]))
			}
			if s.Index >= len(node) {
				return fmt.Errorf("%s has %d items; index %d is out of range", describeAt(segs[:i]), len(node), s.Index)
			}
			if last {
				node[s.Index] = value
				return nil
			}
			cur = node[s.Index]
		default:
			return fmt.Errorf("%s is %s, which has no %s", describeAt(segs[:i]), kindOf(node), s)
		}
	}
	return nil
}

// setCreating sets the value at segs, creating mappings on the way (placement writes into
// values that may not declare the key yet). It fails where the path crosses a non-mapping.
func setCreating(root *object, segs []Segment, value any) error {
	cur := root
	for i, s := range segs {
		if s.IsIndex {
			return fmt.Errorf("placement paths address mappings only; %s is a list index", renderPath(segs[:i+1]))
		}
		if i == len(segs)-1 {
			cur.set(s.Key, value)
			return nil
		}
		next, ok := cur.get(s.Key)
		if !ok || next == nil {
			m := &object{}
			cur.set(s.Key, m)
			cur = m
			continue
		}
		m, ok := next.(*object)
		if !ok {
			return fmt.Errorf("%s is %s, not a mapping", renderPath(segs[:i+1]), kindOf(next))
		}
		cur = m
	}
	return nil
}

func describeAt(segs []Segment) string {
	if len(segs) == 0 {
		return "the values"
	}
	return renderPath(segs)
}

// keysOf lists a mapping's keys (in order) for an error message.
func keysOf(keys []string) string {
	if len(keys) == 0 {
		return "none"
	}
	if len(keys) > 20 {
		return strings.Join(keys[:20], ", ") + fmt.Sprintf(", and %d more", len(keys)-20)
	}
	return strings.Join(keys, ", ")
}
