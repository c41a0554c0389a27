package appwriter

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/gentype"
	clienttesting "k8s.io/client-go/testing"

	"github.com/aicr-run/aicr-operator/shared/argoapp"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/bustest"
)

var appsResource = argoapp.ApplicationsResource

// call is one write the fake saw.
type call struct {
	Verb      string // create, patch or delete
	PatchType types.PatchType
	Manager   string
	Force     bool
	Body      string
	UID       string // delete precondition
}

// fakeApps is an Application API for unit tests. Server-side apply goes through client-go's
// field-managed object tracker (managedFields, conflicts, force); on top of it the fake does what
// the tracker does not and the writer relies on: resourceVersion and UID, the resourceVersion
// and UID preconditions of a write (a patch carrying a UID never creates), the UID
// precondition of a delete, AlreadyExists on a create, and deletion held by finalizers.
type fakeApps struct {
	t      testing.TB
	client *gentype.FakeClient[*argoapp.Application]

	mu      sync.Mutex
	meta    map[string]*objMeta
	counter int
	calls   []call
	// fail, when set, may return an error for a request before it is served.
	fail func(verb string, c call) error
	// before, when set, runs before a write is served (outside the lock): Argo CD or a person
	// acting between the writer's read and its write.
	before func(verb string, c call)
}

type objMeta struct {
	uid      string
	rv       string
	deleting *metav1.Time
}

func newFakeApps(t testing.TB) *fakeApps {
	t.Helper()
	tracker := clienttesting.NewFieldManagedObjectTracker(argoapp.Scheme, argoapp.Codecs.UniversalDecoder(), managedfields.NewDeducedTypeConverter())
	fake := &clienttesting.Fake{}
	fake.AddReactor("*", "*", clienttesting.ObjectReaction(tracker))
	client := gentype.NewFakeClient(fake, testEngineNS, argoapp.SchemeGroupVersion.WithResource(argoapp.ResourceApplications),
		argoapp.SchemeGroupVersion.WithKind("Application"), func() *argoapp.Application { return &argoapp.Application{} })
	return &fakeApps{t: t, client: client, meta: map[string]*objMeta{}}
}

func (f *fakeApps) nextLocked() string {
	f.counter++
	return strconv.Itoa(f.counter)
}

// stampLocked sets what the tracker does not keep.
func (f *fakeApps) stampLocked(app *argoapp.Application) *argoapp.Application {
	if app == nil {
		return nil
	}
	m := f.meta[app.Name]
	if m == nil {
		return app
	}
	app.UID, app.ResourceVersion, app.DeletionTimestamp = types.UID(m.uid), m.rv, m.deleting
	return app
}

// touchLocked records a write of name: a new resourceVersion, and a UID when it is new.
func (f *fakeApps) touchLocked(name string) {
	m := f.meta[name]
	if m == nil {
		m = &objMeta{uid: "uid-" + f.nextLocked()}
		f.meta[name] = m
	}
	m.rv = f.nextLocked()
}

func (f *fakeApps) Get(ctx context.Context, name string, opts metav1.GetOptions) (*argoapp.Application, error) {
	if err := f.failFor("get", call{Verb: "get"}); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	app, err := f.client.Get(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	return f.stampLocked(app), nil
}

func (f *fakeApps) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, _ ...string) (*argoapp.Application, error) {
	c := call{Verb: "patch", PatchType: pt, Manager: opts.FieldManager, Force: opts.Force != nil && *opts.Force, Body: string(data)}
	if f.before != nil {
		f.before("patch", c)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
	if err := f.failFor("patch", c); err != nil {
		return nil, err
	}
	var body struct {
		Metadata struct {
			UID             string `json:"uid"`
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &body); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	m := f.meta[name]
	// Like the API server: a patch carrying a UID is a conflict when there is no object (it
	// never creates one), and invalid (an immutable field) when another object has the name.
	if uid := body.Metadata.UID; uid != "" {
		if m == nil {
			return nil, apierrors.NewConflict(appsResource, name, fmt.Errorf("uid mismatch: the provided object specified uid %s, and no existing object was found", uid))
		}
		if m.uid != uid {
			return nil, apierrors.NewInvalid(argoapp.SchemeGroupVersion.WithKind("Application").GroupKind(), name,
				field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), uid, "field is immutable")})
		}
	}
	// Like the API server: a resourceVersion guards an update; a server-side apply to a name
	// that does not exist creates the object whatever resourceVersion it carries, and a merge
	// patch to it is not found.
	if want := body.Metadata.ResourceVersion; want != "" && m != nil && m.rv != want {
		return nil, apierrors.NewConflict(appsResource, name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	if m == nil && pt != types.ApplyPatchType {
		return nil, apierrors.NewNotFound(appsResource, name)
	}
	app, err := f.client.Patch(ctx, name, pt, data, opts)
	if err != nil {
		return nil, err
	}
	f.touchLocked(name)
	return f.stampLocked(app), nil
}

func (f *fakeApps) Create(ctx context.Context, data []byte, opts metav1.CreateOptions) (*argoapp.Application, error) {
	c := call{Verb: "create", Manager: opts.FieldManager, Body: string(data)}
	if f.before != nil {
		f.before("create", c)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
	if err := f.failFor("create", c); err != nil {
		return nil, err
	}
	app := &argoapp.Application{}
	if err := json.Unmarshal(data, app); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if f.meta[app.Name] != nil {
		return nil, apierrors.NewAlreadyExists(appsResource, app.Name)
	}
	out, err := f.client.Create(ctx, app, opts)
	if err != nil {
		return nil, err
	}
	f.touchLocked(app.Name)
	return f.stampLocked(out), nil
}

func (f *fakeApps) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	c := call{Verb: "delete"}
	if opts.Preconditions != nil && opts.Preconditions.UID != nil {
		c.UID = string(*opts.Preconditions.UID)
	}
	if f.before != nil {
		f.before("delete", c)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
	if err := f.failFor("delete", c); err != nil {
		return err
	}
	m := f.meta[name]
	if m == nil {
		return apierrors.NewNotFound(appsResource, name)
	}
	if c.UID != "" && c.UID != m.uid {
		return apierrors.NewConflict(appsResource, name, fmt.Errorf("Precondition failed: UID in precondition: %s, UID in object meta: %s", c.UID, m.uid))
	}
	app, err := f.client.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if len(app.Finalizers) > 0 {
		now := metav1.Now()
		m.deleting = &now
		m.rv = f.nextLocked()
		return nil
	}
	delete(f.meta, name)
	return f.client.Delete(ctx, name, opts)
}

func (f *fakeApps) failFor(verb string, c call) error {
	if f.fail == nil {
		return nil
	}
	return f.fail(verb, c)
}

// create stores app as someone else would (a foreign Application, or a prepared state).
func (f *fakeApps) create(app *argoapp.Application) *argoapp.Application {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	app = app.DeepCopy()
	app.Namespace = testEngineNS
	out, err := f.client.Create(context.Background(), app, metav1.CreateOptions{FieldManager: "someone-else"})
	if err != nil {
		f.t.Fatalf("create application %s: %v", app.Name, err)
	}
	f.touchLocked(app.Name)
	return f.stampLocked(out)
}

// update changes the stored object as Argo CD's controller does (status, operation).
func (f *fakeApps) update(name string, mutate func(*argoapp.Application)) {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	app, err := f.client.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("get application %s: %v", name, err)
	}
	mutate(app)
	if _, err := f.client.Update(context.Background(), app, metav1.UpdateOptions{FieldManager: "argocd-application-controller"}); err != nil {
		f.t.Fatalf("update application %s: %v", name, err)
	}
	f.touchLocked(name)
}

// remove deletes the stored object outright: Argo CD finished a deletion, or a person deleted
// it before recreating a namesake.
func (f *fakeApps) remove(name string) {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.meta, name)
	if err := f.client.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		f.t.Fatalf("delete application %s: %v", name, err)
	}
}

// live returns the stored object, or nil.
func (f *fakeApps) live(name string) *argoapp.Application {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	app, err := f.client.Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.t.Fatalf("get application %s: %v", name, err)
	}
	return f.stampLocked(app)
}

// writes returns the writes seen so far and forgets them.
func (f *fakeApps) writes() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.calls
	f.calls = nil
	return out
}

// published is one result a test's Writer published.
type published struct {
	Subject string
	ID      string
	Result  *bus.ApplyResult
}

// results returns what the Writer published, failing the test on a message that is not an
// ApplyResult: the Writer publishes nothing else.
func results(t *testing.T, pub *bustest.Recorder) []published {
	t.Helper()
	var out []published
	for _, m := range pub.Sent() {
		res, ok := m.Msg.(*bus.ApplyResult)
		if !ok {
			t.Fatalf("published a %T on %s; want only ApplyResults", m.Msg, m.Subject)
		}
		out = append(out, published{Subject: m.Subject, ID: m.ID, Result: res})
	}
	return out
}
