package plan

import (
	"slices"
	"strings"
)

// object is a JSON mapping as Resolve holds it while it builds a plan: its members sorted by
// key, each key once. Decoding values into map[string]any and sorting every map's keys again to
// write the canonical form were most of Resolve's CPU at 10 000 releases, and the maps' hash
// groups most of what it allocated; a sorted slice is written as it stands and holds no more
// than its members. Only Resolve's own values are objects: Release.Values, decodeValue and
// everything exported stay map[string]any, and the encoder writes both the same way.
type object struct {
	members []member // sorted by key, keys unique
}

// find returns the index of key, or where it would be inserted, and whether it is there.
func (o *object) find(key string) (int, bool) {
	return slices.BinarySearchFunc(o.members, key, func(m member, k string) int { return strings.Compare(m.key, k) })
}

// get returns the value of key.
func (o *object) get(key string) (any, bool) {
	i, ok := o.find(key)
	if !ok {
		return nil, false
	}
	return o.members[i].value, true
}

// set sets key to v, inserting it in order when it is new.
func (o *object) set(key string, v any) {
	i, ok := o.find(key)
	if ok {
		o.members[i].value = v
		return
	}
	o.members = slices.Insert(o.members, i, member{key, v})
}

// keys returns the keys in order.
func (o *object) keys() []string {
	keys := make([]string, len(o.members))
	for i, m := range o.members {
		keys[i] = m.key
	}
	return keys
}

// sortMembers puts members read in document order into key order and keeps, of a repeated key,
// the last (encoding/json's rule for a map). It returns the members kept, in place.
func sortMembers(ms []member) []member {
	sorted := true
	for i := 1; i < len(ms); i++ {
		if ms[i-1].key >= ms[i].key {
			sorted = false
			break
		}
	}
	if sorted {
		return ms
	}
	slices.SortStableFunc(ms, byKey)
	out := ms[:0]
	for i := range ms {
		if i+1 < len(ms) && ms[i+1].key == ms[i].key {
			continue // a later member has the same key: it wins
		}
		out = append(out, ms[i])
	}
	return out
}

// ordered returns a copy of v in which every mapping, at any depth, is an *object: for values
// decoded by encoding/json, for placement rendered as maps, and to give each release its own
// copy of a placement already converted. Lists and mappings are copied; v is not modified.
func ordered(v any) any {
	switch t := v.(type) {
	case *object:
		ms := make([]member, len(t.members))
		for i, m := range t.members {
			ms[i] = member{m.key, ordered(m.value)}
		}
		return &object{members: ms}
	case map[string]any:
		if t == nil {
			return nil
		}
		ms := make([]member, 0, len(t))
		for k, x := range t {
			ms = append(ms, member{k, ordered(x)})
		}
		slices.SortFunc(ms, byKey)
		return &object{members: ms}
	case []any:
		if t == nil {
			return t
		}
		l := make([]any, len(t))
		for i, x := range t {
			l[i] = ordered(x)
		}
		return l
	default:
		return v
	}
}

// byKey orders members by key, in byte order (encoding/json's order of a map's keys).
func byKey(a, b member) int { return strings.Compare(a.key, b.key) }
