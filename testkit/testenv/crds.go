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

// InstallArgoCRDs installs Argo CD v3.4.2's Application and AppProject CRDs (and the
// ApplicationSet one under Options.ApplicationSetCRD) and waits until they are Established.
// Start does this unless Options.SkipArgoCRDs.
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
		if f == applicationSetCRDFile && !e.opts.ApplicationSetCRD {
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
//
// Each CRD's storage is made ready first. The API server's CRD finalizer lists a CRD's
// instances through its watch cache, which a CRD no client has read yet starts only then; a
// list of a cache still initializing fails ("storage is (re)initializing"), and the finalizer
// retries with a backoff that doubles from 5 ms, so on a busy machine, where the cache starts
// slowly, the retries can run past it until the next is minutes away (one CI run waited more
// than three minutes for the CRDs). A client's full list waits for the cache instead (the API
// server answers 429 with a Retry-After, and client-go retries).
func (e *Env) DeleteCRDs(ctx context.Context, names ...string) error {
	for _, name := range names {
		if err := e.waitStorageReady(ctx, name); err != nil {
			return err
		}
	}
	for _, name := range names {
		err := e.dyn.Resource(crdGVR).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete crd %s: %w", name, err)
		}
	}
	for _, name := range names {
		var last *unstructured.Unstructured // the newest copy read; a failed read keeps the one before
		err := WaitFor(ctx, crdRemovedTimeout, "crd "+name+" removed", func(ctx context.Context) (bool, error) {
			crd, err := e.dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			if err == nil {
				last = crd
			}
			return false, err
		})
		if err != nil {
			// The API server's CRD finalizer deletes the instances, then drops its finalizer:
			// its Terminating condition says how far it got, and its log lines why.
			return fmt.Errorf("%w; %s; the api server's log on crds:\n%s", err, crdState(last), e.apiServerLogOn(name))
		}
	}
	return nil
}

// waitStorageReady lists every instance of the named CRD's resource, with no limit (a list
// with a limit is served from etcd while the watch cache initializes), until the API server
// answers. A CRD that does not exist or is not Established has no storage to wait for.
func (e *Env) waitStorageReady(ctx context.Context, name string) error {
	crd, err := e.dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get crd %s: %w", name, err)
	}
	if !hasCondition(crd, "Established", "True") {
		return nil
	}
	gvr, err := servedResource(crd)
	if err != nil {
		return err
	}
	return WaitFor(ctx, crdEstablishedTimeout, "crd "+name+"'s storage ready", func(ctx context.Context) (bool, error) {
		_, err := e.dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		return err == nil, err
	})
}

// servedResource is the resource of a CRD at its storage version.
func servedResource(crd *unstructured.Unstructured) (schema.GroupVersionResource, error) {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if name, _ := m["name"].(string); name != "" && m["storage"] == true {
			return schema.GroupVersionResource{Group: group, Version: name, Resource: plural}, nil
		}
	}
	return schema.GroupVersionResource{}, fmt.Errorf("crd %s: no storage version in spec.versions", crd.GetName())
}

// crdState says what a CRD that was not removed holds: its finalizers and status conditions,
// or that it was never read.
func crdState(crd *unstructured.Unstructured) string {
	if crd == nil {
		return "the crd was never read"
	}
	return fmt.Sprintf("the crd's finalizers %v, conditions %s", crd.GetFinalizers(), crdConditions(crd))
}

// crdConditions renders a CRD's status conditions as "Type=Status Reason: message; ...".
func crdConditions(crd *unstructured.Unstructured) string {
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

// crdLogLines is how many of the API server's log lines on a CRD a failed removal quotes.
const crdLogLines = 20

// apiServerLogOn returns the API server's newest log lines that name the CRD or come from its
// CRD finalizer (the controller that deletes a CRD's instances and drops its finalizer).
func (e *Env) apiServerLogOn(crd string) string {
	data, err := os.ReadFile(e.LogPath(ProcAPIServer))
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := linesWith(data, crdLogLines, crd, "crd_finalizer")
	if len(lines) == 0 {
		return "(none)"
	}
	return string(lines)
}

// linesWith returns the last n lines of data that contain any of words, each ending in a newline.
func linesWith(data []byte, n int, words ...string) []byte {
	var kept [][]byte
	for line := range bytes.Lines(data) {
		if slices.ContainsFunc(words, func(w string) bool { return bytes.Contains(line, []byte(w)) }) {
			kept = append(kept, bytes.TrimRight(line, "\n"))
		}
	}
	kept = kept[max(0, len(kept)-n):]
	var out []byte
	for _, l := range kept {
		out = append(append(out, l...), '\n')
	}
	return out
}
