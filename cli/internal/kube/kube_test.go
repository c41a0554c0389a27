package kube

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// runtimeJSON is a ClusterRuntime as the API server answers with it once the planner wrote it
// (it updates the runtime whole, adding its finalizer, so the empty rollout and validation
// settings the type always encodes are stored; before that write, Raw shows them and the stored
// object does not): every kind of field the type has (overrides' free-form values included), set.
const runtimeJSON = `{"apiVersion":"operator.aicr.run/v1alpha1","kind":"ClusterRuntime",
"metadata":{"name":"cluster","uid":"67d9f59a-2c51-48b3-9ac9-99a32b084c9f","resourceVersion":"77","generation":3,
 "creationTimestamp":"2026-12-01T09:03:00Z","finalizers":["operator.aicr.run/cleanup"],
 "annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}"},
 "managedFields":[{"manager":"kubectl","operation":"Apply","apiVersion":"operator.aicr.run/v1alpha1","time":"2026-12-01T09:03:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]},
"spec":{"bundle":{"configMap":{"name":"gpu-stack"}},"paused":true,
 "overrides":[{"component":"gpu-operator","path":"driver.version","value":"570.86.15"},
  {"component":"gpu-operator","path":"driver.replicas","value":3},
  {"component":"gpu-operator","path":"driver.env","value":[{"name":"A","value":"1"}]}],
 "rollout":{},"validation":{}},
"status":{"observedGeneration":3,"activePlan":"sha256:5a9d2e5ab6abbcde72f061fe33c835b9f1953729406caf5c18d47ec410c43e9e","rollout":"r-5a9d2e5ab6-none",
 "conditions":[{"type":"Ready","status":"True","reason":"RolledOut","message":"9/9","lastTransitionTime":"2026-12-01T09:04:02Z","observedGeneration":3}]}}`

// TestRawIsWhatTheAPIServerSent proves -o json|yaml print the same object through the typed
// client as through the dynamic client before it: Raw of the typed object encodes to the JSON
// the API server's answer decodes to, for the recorded rollout of docs/images and a runtime.
func TestRawIsWhatTheAPIServerSent(t *testing.T) {
	t.Parallel()
	recorded, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "images", "example-rollout.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rolloutJSON, err := yaml.YAMLToJSON(recorded)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		data []byte
		raw  func(data []byte) (*unstructured.Unstructured, error)
	}{
		"rollout": {rolloutJSON, func(data []byte) (*unstructured.Unstructured, error) {
			var ro v1alpha1.RuntimeRollout
			err := json.Unmarshal(data, &ro)
			ro.TypeMeta = v1alpha1.RuntimeRollout{}.TypeMeta // the typed client's decoder clears it
			return (&Rollout{RuntimeRollout: &ro}).Raw(), err
		}},
		"runtime": {[]byte(runtimeJSON), func(data []byte) (*unstructured.Unstructured, error) {
			var rt v1alpha1.ClusterRuntime
			err := json.Unmarshal(data, &rt)
			rt.TypeMeta = v1alpha1.ClusterRuntime{}.TypeMeta
			return (&Runtime{ClusterRuntime: &rt}).Raw(), err
		}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := tc.raw(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			want, err := runtime.Decode(unstructured.UnstructuredJSONScheme, tc.data)
			if err != nil {
				t.Fatal(err)
			}
			gotJSON, err := json.Marshal(got.Object)
			if err != nil {
				t.Fatal(err)
			}
			wantJSON, err := json.Marshal(want.(*unstructured.Unstructured).Object)
			if err != nil {
				t.Fatal(err)
			}
			if string(gotJSON) != string(wantJSON) {
				t.Errorf("Raw encodes to\n%s\nthe API server's object to\n%s", gotJSON, wantJSON)
			}
		})
	}
}
