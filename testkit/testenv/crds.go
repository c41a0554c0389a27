package testenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/aicr-run/aicr-operator/shared/api/crds"
)

// fieldManager is the server-side-apply field manager of everything testenv applies.
const fieldManager = "aicr-testenv"

// Argo CD's resources, for dynamic clients.
var (
	ApplicationGVR    = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}
	AppProjectGVR     = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "appprojects"}
	ApplicationSetGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applicationsets"}
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// argoCRDNames are the names of Argo CD's CRDs (as in argoCRDFiles).
var argoCRDNames = []string{"applications.argoproj.io", "appprojects.argoproj.io", "applicationsets.argoproj.io"}

func (e *Env) installDefaultCRDs(ctx context.Context) error {
	var docs [][]byte
	if !e.opts.SkipOperatorCRDs {
		ours, err := operatorCRDs()
		if err != nil {
			return err
		}
		docs = append(docs, ours...)
	}
	if !e.opts.SkipArgoCRDs {
		argo, err := e.argoCRDs()
		if err != nil {
			return err
		}
		docs = append(docs, argo...)
	}
	// one call: the apiserver establishes them all at once
	return e.InstallCRDs(ctx, docs...)
}

// operatorCRDs returns the YAML files of shared/api/crds.
func operatorCRDs() ([][]byte, error) {
	names, err := fs.Glob(crds.FS, "*.yaml")
	if err != nil {
		return nil, fmt.Errorf("list operator crds: %w", err)
	}
	slices.Sort(names)
	var docs [][]byte
	for _, n := range names {
		data, err := fs.ReadFile(crds.FS, n)
		if err != nil {
			return nil, fmt.Errorf("read operator crd %s: %w", n, err)
		}
		docs = append(docs, data)
	}
	return docs, nil
}

// InstallArgoCRDs installs Argo CD v3.4.2's Application, AppProject and ApplicationSet CRDs
// (without ApplicationSet under Options.SkipApplicationSetCRD) and waits until they are
// Established. Start does this unless Options.SkipArgoCRDs.
func (e *Env) InstallArgoCRDs(ctx context.Context) error {
	docs, err := e.argoCRDs()
	if err != nil {
		return err
	}
	return e.InstallCRDs(ctx, docs...)
}

func (e *Env) argoCRDs() ([][]byte, error) {
	if e.argoCRD == "" {
		dir, err := argoCRDDir(e.ToolsDir)
		if err != nil {
			return nil, err
		}
		e.argoCRD = dir
	}
	var docs [][]byte
	for _, f := range argoCRDFiles {
		if f == applicationSetCRDFile && e.opts.SkipApplicationSetCRD {
			continue
		}
		data, err := os.ReadFile(filepath.Join(e.argoCRD, f))
		if err != nil {
			return nil, fmt.Errorf("read argo cd crd: %w", err)
		}
		docs = append(docs, data)
	}
	return docs, nil
}

// UninstallArgoCRDs deletes Argo CD's CRDs (and with them every Application, AppProject and
// ApplicationSet) and waits until they are gone.
func (e *Env) UninstallArgoCRDs(ctx context.Context) error {
	return e.DeleteCRDs(ctx, argoCRDNames...)
}

// InstallCRDs server-side applies the CustomResourceDefinitions in the given YAML files (each may
// hold several documents) and waits until every one is Established. Server-side apply keeps no
// last-applied annotation, so CRDs above its 256 KiB limit (ApplicationSet: 1.4 MB) are fine,
// and installing again is a no-op.
func (e *Env) InstallCRDs(ctx context.Context, yamlFiles ...[]byte) error {
	var names []string
	for _, file := range yamlFiles {
		objs, err := decodeYAML(file)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			if obj.GetKind() != "CustomResourceDefinition" {
				return fmt.Errorf("install crds: %s %q is not a CustomResourceDefinition", obj.GetKind(), obj.GetName())
			}
			data, err := obj.MarshalJSON()
			if err != nil {
				return fmt.Errorf("encode crd %s: %w", obj.GetName(), err)
			}
			_, err = e.dyn.Resource(crdGVR).Patch(ctx, obj.GetName(), types.ApplyPatchType, data,
				metav1.PatchOptions{FieldManager: fieldManager, Force: ptrTo(true)})
			if err != nil {
				return fmt.Errorf("apply crd %s: %w", obj.GetName(), err)
			}
			names = append(names, obj.GetName())
		}
	}
	for _, name := range names {
		err := WaitFor(ctx, crdEstablishedTimeout, "crd "+name+" established", func(ctx context.Context) (bool, error) {
			crd, err := e.dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return hasCondition(crd, "Established", "True"), nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// DeleteCRDs deletes the named CRDs (missing ones are fine) and waits until they are gone.
func (e *Env) DeleteCRDs(ctx context.Context, names ...string) error {
	for _, name := range names {
		err := e.dyn.Resource(crdGVR).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete crd %s: %w", name, err)
		}
	}
	for _, name := range names {
		var last *unstructured.Unstructured
		err := WaitFor(ctx, crdRemovedTimeout, "crd "+name+" removed", func(ctx context.Context) (bool, error) {
			crd, err := e.dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			last = crd
			return false, err
		})
		if err != nil {
			// The API server's CRD finalizer deletes the instances, then drops its finalizer:
			// its Terminating condition says how far it got.
			return fmt.Errorf("%w; the crd's finalizers %v, conditions %s", err, last.GetFinalizers(), crdConditions(last))
		}
	}
	return nil
}

// crdConditions renders a CRD's status conditions as "Type=Status Reason: message; ...".
func crdConditions(crd *unstructured.Unstructured) string {
	if crd == nil {
		return "unknown"
	}
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	var out []string
	for _, c := range conds {
		m, _ := c.(map[string]any)
		out = append(out, fmt.Sprintf("%v=%v %v: %v", m["type"], m["status"], m["reason"], m["message"]))
	}
	return strings.Join(out, "; ")
}

// decodeYAML splits a multi-document YAML (or JSON) file into objects, skipping empty documents.
func decodeYAML(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read yaml document: %w", err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("convert yaml document: %w", err)
		}
		if len(bytes.TrimSpace(js)) == 0 || string(bytes.TrimSpace(js)) == "null" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("decode yaml document: %w", err)
		}
		out = append(out, obj)
	}
}

// hasCondition reports whether obj's status.conditions holds type with status.
func hasCondition(obj *unstructured.Unstructured, condType, status string) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == condType && m["status"] == status {
			return true
		}
	}
	return false
}

func ptrTo[T any](v T) *T { return &v }
