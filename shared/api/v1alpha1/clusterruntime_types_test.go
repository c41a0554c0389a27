package v1alpha1

import "testing"

func TestConfigMapBundleSourceLocation(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		src           ConfigMapBundleSource
		wantNamespace string
		wantKey       string
	}{
		"neither named: the operator namespace and the default key": {
			src:           ConfigMapBundleSource{Name: "gpu-bundle"},
			wantNamespace: "aicr-system", wantKey: DefaultBundleKey,
		},
		"both named: as named": {
			src:           ConfigMapBundleSource{Name: "gpu-bundle", Namespace: "bundles", Key: "stack.yaml"},
			wantNamespace: "bundles", wantKey: "stack.yaml",
		},
		"only the key named": {
			src:           ConfigMapBundleSource{Name: "gpu-bundle", Key: "stack.yaml"},
			wantNamespace: "aicr-system", wantKey: "stack.yaml",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ns, key := tc.src.Location("aicr-system")
			if ns != tc.wantNamespace || key != tc.wantKey {
				t.Errorf("Location = %s, %s; want %s, %s", ns, key, tc.wantNamespace, tc.wantKey)
			}
		})
	}
}
