package aicrbundle

import (
	"bytes"
	"encoding/json"
	"fmt"

	"sigs.k8s.io/yaml"
)

// MergeValues merges cluster (cluster-values.yaml) over base (values.yaml) with the rule helm
// applies to `helm upgrade -f values.yaml -f cluster-values.yaml`, the command AICR's install.sh
// runs: a key in both whose values are both mappings is merged recursively; any other value in
// cluster replaces base's (lists are replaced whole, never concatenated or merged by index; a
// null in cluster stays null, which tells helm to drop the chart's default). Neither input is
// modified; the result shares no mapping with them.
func MergeValues(base, cluster map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(cluster))
	for k, v := range base {
		out[k] = clone(v)
	}
	for k, v := range cluster {
		if cm, ok := v.(map[string]any); ok {
			if bm, ok := out[k].(map[string]any); ok {
				out[k] = MergeValues(bm, cm)
				continue
			}
		}
		out[k] = clone(v)
	}
	return out
}

func clone(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[k] = clone(e)
		}
		return m
	case []any:
		l := make([]any, len(t))
		for i, e := range t {
			l[i] = clone(e)
		}
		return l
	}
	return v
}

// decodeYAMLMap decodes a values file: a YAML mapping (numbers as json.Number, as helm reads
// them through JSON), or nothing for an empty file.
func decodeYAMLMap(raw []byte) (map[string]any, error) {
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("not YAML: %v", err)
	}
	if t := bytes.TrimSpace(js); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not YAML: %v", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("a mapping of Helm values is accepted, not %s", kindOf(v))
	}
	return m, nil
}

func kindOf(v any) string {
	switch v.(type) {
	case []any:
		return "a list"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}
