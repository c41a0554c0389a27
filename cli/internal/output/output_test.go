package output

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func rollout() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "operator.aicr.run/v1alpha1", "kind": "RuntimeRollout",
		"metadata": map[string]any{"name": "r-1", "managedFields": []any{map[string]any{"manager": "planner"}}},
		"status":   map[string]any{"phase": "Progressing", "steps": []any{map[string]any{"index": int64(1), "release": "nfd"}}},
	}}
}

func printAs(t *testing.T, format string, d Doc, flags ...string) (string, error) {
	t.Helper()
	f := NewFlags("dot")
	cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
	f.AddFlags(cmd)
	if err := cmd.ParseFlags(append([]string{"-o", format}, flags...)); err != nil {
		return "", err
	}
	if err := f.Validate(); err != nil {
		return "", err
	}
	var b bytes.Buffer
	err := f.Print(&b, d)
	return b.String(), err
}

func TestFormats(t *testing.T) {
	d := Doc{
		Object:  rollout(),
		Names:   []string{Name(rollout())},
		Text:    func(w io.Writer) error { _, err := io.WriteString(w, "text view\n"); return err },
		Formats: map[string]func(io.Writer) error{"dot": func(w io.Writer) error { _, err := io.WriteString(w, "digraph{}\n"); return err }},
	}
	for name, tc := range map[string]struct{ format, want string }{
		"text is the default":             {"text", "text view\n"},
		"name prints kind.group/name":     {"name", "runtimerollout.operator.aicr.run/r-1\n"},
		"jsonpath walks the object":       {"jsonpath={.status.steps[0].release}", "nfd"},
		"go-template walks the object":    {"go-template={{.status.phase}}", "Progressing"},
		"jsonpath-as-json prints JSON":    {"jsonpath-as-json={.metadata.name}", "[\n    \"r-1\"\n]\n"},
		"the command's own format prints": {"dot", "digraph{}\n"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := printAs(t, tc.format, d)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	js, err := printAs(t, "json", d)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(js), &obj); err != nil {
		t.Fatalf("json: %v\n%s", err, js)
	}
	if strings.Contains(js, "managedFields") || obj["kind"] != "RuntimeRollout" {
		t.Errorf("json keeps managedFields or loses the kind:\n%s", js)
	}
	js, _ = printAs(t, "json", d, "--show-managed-fields")
	if !strings.Contains(js, "managedFields") {
		t.Errorf("--show-managed-fields drops them:\n%s", js)
	}
	if got, err := printAs(t, "text", d, "--template", "{{.metadata.name}}"); err != nil || got != "r-1" {
		t.Errorf("--template without -o: %q %v, want a go-template", got, err)
	}
	y, _ := printAs(t, "yaml", d)
	if !strings.Contains(y, "kind: RuntimeRollout\n") || !strings.Contains(y, "phase: Progressing") {
		t.Errorf("yaml:\n%s", y)
	}
}

func TestPlainValues(t *testing.T) {
	d := Doc{Object: struct {
		Digest string `json:"digest"`
	}{"sha256:ab"}}
	for format, want := range map[string]string{"json": "{\n    \"digest\": \"sha256:ab\"\n}\n", "yaml": "digest: sha256:ab\n", "jsonpath={.digest}": "sha256:ab"} {
		got, err := printAs(t, format, d)
		if err != nil || got != want {
			t.Errorf("-o %s: %q, %v; want %q", format, got, err, want)
		}
	}
}

func TestBadFormatsNameTheFlag(t *testing.T) {
	for format, want := range map[string]string{
		"xml":                 `-o "xml": use one of text, json, yaml, name, dot, jsonpath=..., jsonpath-file=...`,
		"jsonpath={.a":        "-o jsonpath={.a: error parsing jsonpath",
		"go-template={{.a":    "-o go-template={{.a: error parsing template",
		"jsonpath-file=/none": "error reading --template /none",
	} {
		_, err := printAs(t, format, Doc{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("-o %s: %v, want %q", format, err, want)
		}
	}
}

func TestList(t *testing.T) {
	got, err := printAs(t, "jsonpath={.items[*].metadata.name}", Doc{Object: List(rollout(), nil, rollout())})
	if err != nil || got != "r-1 r-1" {
		t.Errorf("%q %v", got, err)
	}
}
