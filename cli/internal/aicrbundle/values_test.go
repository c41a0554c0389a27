package aicrbundle

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMergeValues(t *testing.T) {
	tests := []struct {
		name                string
		base, cluster, want string
	}{
		{"nested mappings merge key by key",
			`{"operator":{"resources":{"limits":{"cpu":"500m","memory":"700Mi"},"requests":{"cpu":"200m"}}}}`,
			`{"operator":{"resources":{"limits":{"memory":"1Gi"}},"nodeSelector":{"pool":"system"}}}`,
			`{"operator":{"resources":{"limits":{"cpu":"500m","memory":"1Gi"},"requests":{"cpu":"200m"}},"nodeSelector":{"pool":"system"}}}`},
		{"a list is replaced whole, never merged by index or appended",
			`{"devicePlugin":{"env":[{"name":"A","value":"1"},{"name":"B","value":"2"}],"enabled":true}}`,
			`{"devicePlugin":{"env":[{"name":"B","value":"3"}]}}`,
			`{"devicePlugin":{"env":[{"name":"B","value":"3"}],"enabled":true}}`},
		{"an empty list in cluster-values empties the list",
			`{"tolerations":[{"operator":"Exists"}]}`, `{"tolerations":[]}`, `{"tolerations":[]}`},
		{"a scalar replaces a mapping and a mapping replaces a scalar",
			`{"a":{"b":1},"c":"x"}`, `{"a":"flat","c":{"d":true}}`, `{"a":"flat","c":{"d":true}}`},
		{"null stays null (helm then drops the chart's default)",
			`{"a":{"b":1},"keep":1}`, `{"a":null}`, `{"a":null,"keep":1}`},
		{"keys only in one side are kept",
			`{"only":{"base":1}}`, `{"other":[1,2]}`, `{"only":{"base":1},"other":[1,2]}`},
		{"empty cluster-values leave values.yaml as it is",
			`{"a":{"b":[1]}}`, `{}`, `{"a":{"b":[1]}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base, cluster := decode(t, tt.base), decode(t, tt.cluster)
			got := MergeValues(base, cluster)
			if diff := cmp.Diff(decode(t, tt.want), got); diff != "" {
				t.Errorf("merge (-want +got):\n%s", diff)
			}
			// Neither input changes, and the result shares no mapping with them.
			if diff := cmp.Diff(decode(t, tt.base), base); diff != "" {
				t.Errorf("values.yaml changed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(decode(t, tt.cluster), cluster); diff != "" {
				t.Errorf("cluster-values.yaml changed (-want +got):\n%s", diff)
			}
			for k, v := range got {
				if m, ok := v.(map[string]any); ok {
					m["__probe"] = true
					if bm, ok := base[k].(map[string]any); ok && bm["__probe"] == true {
						t.Errorf("the result's %q mapping is values.yaml's", k)
					}
					if cm, ok := cluster[k].(map[string]any); ok && cm["__probe"] == true {
						t.Errorf("the result's %q mapping is cluster-values.yaml's", k)
					}
				}
			}
		})
	}
}

func TestDecodeValuesKeepsNumbersAndRefusesNonMappings(t *testing.T) {
	m, err := decodeYAMLMap([]byte("replicas: 3\nversion: \"595.91.07\"\nratio: 0.25\n"))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(m)
	if got, want := string(raw), `{"ratio":0.25,"replicas":3,"version":"595.91.07"}`; got != want {
		t.Errorf("values %s, want %s", got, want)
	}
	for _, doc := range []string{"- a\n- b\n", "just a string\n"} {
		if _, err := decodeYAMLMap([]byte(doc)); err == nil {
			t.Errorf("%q decoded as values; want an error naming what is accepted", doc)
		}
	}
	if m, err := decodeYAMLMap([]byte("# only a comment\n")); err != nil || len(m) != 0 {
		t.Errorf("an empty values file: %v, %v; want no values", m, err)
	}
}

func decode(t *testing.T, js string) map[string]any {
	t.Helper()
	m, err := decodeYAMLMap([]byte(js))
	if err != nil {
		t.Fatalf("decode %s: %v", js, err)
	}
	return m
}
