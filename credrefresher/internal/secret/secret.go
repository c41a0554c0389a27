// Package secret reads and writes the Argo CD repo-creds Secret the registry credentials live in.
// It touches that one Secret by name, with get, create and update: never list or watch, which
// would need RBAC over every Secret of the namespace. Fields an admin added are kept.
package secret

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// Data keys Argo CD reads from a repository credential Secret.
const (
	KeyType                 = "type"
	KeyURL                  = "url"
	KeyUsername             = "username"
	KeyPassword             = "password"
	KeyInsecureOCIForceHTTP = "insecureOCIForceHttp"
	// TypeOCI is KeyType's value for an OCI registry.
	TypeOCI = "oci"
)

// Annotations the refresher writes so that a person (kubectl get secret -o yaml) and the next
// refresher after a restart know how old the token is without reading it.
const (
	// AnnotationRefreshedAt is when the token was written (RFC 3339).
	AnnotationRefreshedAt = "operator.aicr.run/token-refreshed-at"
	// AnnotationExpiresAt is when the token expires (RFC 3339).
	AnnotationExpiresAt = "operator.aicr.run/token-expires-at"
)

// Ref names the Secret.
type Ref struct {
	Namespace string
	Name      string
}

func (r Ref) String() string { return r.Namespace + "/" + r.Name }

// Creds are what mode aws writes.
type Creds struct {
	// URL is the credential template's URL prefix (oci://<registry repository>).
	URL string
	// Username and Password are the registry login.
	Username string
	Password string
	// InsecureOCIForceHTTP writes insecureOCIForceHttp: "true" (plain-HTTP registries); when
	// false the key is left as the admin set it.
	InsecureOCIForceHTTP bool
	// RefreshedAt and ExpiresAt are written as annotations.
	RefreshedAt time.Time
	ExpiresAt   time.Time
}

// Store reads and writes one Secret.
type Store struct {
	Secrets typedcorev1.SecretsGetter
	Ref     Ref
}

// Result says what Write did.
type Result string

// Write results.
const (
	Created   Result = "created"
	Updated   Result = "updated"
	Unchanged Result = "unchanged"
)

// Write puts c into the Secret with a get-then-update (create when absent), retrying on a
// conflict. Other data keys, labels and annotations are kept. Errors never carry the data.
func (s *Store) Write(ctx context.Context, c Creds) (Result, error) {
	var res Result
	err := retry.OnError(retry.DefaultRetry, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	}, func() error {
		var err error
		res, err = s.writeOnce(ctx, c)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("write Secret %s: %w", s.Ref, err)
	}
	return res, nil
}

func (s *Store) writeOnce(ctx context.Context, c Creds) (Result, error) {
	api := s.Secrets.Secrets(s.Ref.Namespace)
	live, err := api.Get(ctx, s.Ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		obj := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: s.Ref.Name, Namespace: s.Ref.Namespace},
			Type:       corev1.SecretTypeOpaque,
		}
		apply(obj, c)
		if _, err := api.Create(ctx, obj, metav1.CreateOptions{FieldManager: v1alpha1.FieldManager}); err != nil {
			return "", err
		}
		return Created, nil
	case err != nil:
		return "", err
	}
	obj := live.DeepCopy()
	apply(obj, c)
	if equal(live, obj) {
		return Unchanged, nil
	}
	if _, err := api.Update(ctx, obj, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManager}); err != nil {
		return "", err
	}
	return Updated, nil
}

// apply sets the fields the refresher owns on obj.
func apply(obj *corev1.Secret, c Creds) {
	if obj.Labels == nil {
		obj.Labels = map[string]string{}
	}
	obj.Labels[v1alpha1.LabelArgoSecretType] = v1alpha1.ArgoSecretTypeRepoCreds
	if obj.Annotations == nil {
		obj.Annotations = map[string]string{}
	}
	obj.Annotations[AnnotationRefreshedAt] = c.RefreshedAt.UTC().Format(time.RFC3339)
	obj.Annotations[AnnotationExpiresAt] = c.ExpiresAt.UTC().Format(time.RFC3339)
	if obj.Data == nil {
		obj.Data = map[string][]byte{}
	}
	// stringData is write-only on the server; a live object never has it, but a fake may
	obj.StringData = nil
	obj.Data[KeyType] = []byte(TypeOCI)
	obj.Data[KeyURL] = []byte(c.URL)
	obj.Data[KeyUsername] = []byte(c.Username)
	obj.Data[KeyPassword] = []byte(c.Password)
	if c.InsecureOCIForceHTTP {
		obj.Data[KeyInsecureOCIForceHTTP] = []byte("true")
	}
}

func equal(a, b *corev1.Secret) bool {
	if len(a.Data) != len(b.Data) || len(a.Labels) != len(b.Labels) || len(a.Annotations) != len(b.Annotations) {
		return false
	}
	for k, v := range b.Data {
		if string(a.Data[k]) != string(v) {
			return false
		}
	}
	for k, v := range b.Labels {
		if w, ok := a.Labels[k]; !ok || w != v {
			return false
		}
	}
	for k, v := range b.Annotations {
		if w, ok := a.Annotations[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// LastExpiry returns the expiry the refresher last wrote on the Secret, zero when the Secret or
// the annotation is absent (or unreadable: the next refresh rewrites it).
func (s *Store) LastExpiry(ctx context.Context) (time.Time, error) {
	live, err := s.Secrets.Secrets(s.Ref.Namespace).Get(ctx, s.Ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("get Secret %s: %w", s.Ref, err)
	}
	t, err := time.Parse(time.RFC3339, live.Annotations[AnnotationExpiresAt])
	if err != nil {
		return time.Time{}, nil
	}
	return t, nil
}

// ErrNotFound means the Secret does not exist.
var ErrNotFound = errors.New("not found")

// Report is what Check found. Problems name fields, never their values.
type Report struct {
	// ResourceVersion of the Secret checked, empty when it is absent.
	ResourceVersion string
	// Problems, in a stable order; empty when Argo CD can use the Secret.
	Problems []string
	// Anonymous is true when the Secret holds neither a username nor a password: Argo CD pulls
	// without logging in, which a registry that needs no credentials accepts.
	Anonymous bool
}

// OK reports whether the Secret is usable.
func (r Report) OK() bool { return len(r.Problems) == 0 }

// Check reads the Secret and reports what Argo CD would miss in it: the repo-creds label, and
// type oci and url non-empty; username and password both set, or both empty or absent (a
// registry that needs no credentials: Argo CD pulls anonymously). When wantURL is set, url must
// be a prefix of it (Argo CD matches credential templates by URL prefix). An absent Secret is a
// Report with one problem, not an error; errors are the API server's.
func (s *Store) Check(ctx context.Context, wantURL string) (Report, error) {
	live, err := s.Secrets.Secrets(s.Ref.Namespace).Get(ctx, s.Ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Report{Problems: []string{fmt.Sprintf("Secret %s is %s", s.Ref, ErrNotFound)}}, nil
	}
	if err != nil {
		return Report{}, fmt.Errorf("get Secret %s: %w", s.Ref, err)
	}
	r := Report{ResourceVersion: live.ResourceVersion}
	if v := live.Labels[v1alpha1.LabelArgoSecretType]; v != v1alpha1.ArgoSecretTypeRepoCreds {
		if v == "" {
			r.Problems = append(r.Problems, fmt.Sprintf("label %s is missing (want %s)", v1alpha1.LabelArgoSecretType, v1alpha1.ArgoSecretTypeRepoCreds))
		} else {
			r.Problems = append(r.Problems, fmt.Sprintf("label %s is not %s", v1alpha1.LabelArgoSecretType, v1alpha1.ArgoSecretTypeRepoCreds))
		}
	}
	// A Secret written with stringData and read back from a fake keeps it there.
	get := func(k string) string {
		if v, ok := live.StringData[k]; ok {
			return v
		}
		return string(live.Data[k])
	}
	for _, k := range []string{KeyType, KeyURL} {
		if get(k) == "" {
			r.Problems = append(r.Problems, fmt.Sprintf("data.%s is missing or empty", k))
		}
	}
	switch user, pass := get(KeyUsername), get(KeyPassword); {
	case user == "" && pass == "":
		r.Anonymous = true
	case user == "":
		r.Problems = append(r.Problems, fmt.Sprintf("data.%s is missing or empty while data.%s is set: give both for a registry that needs credentials, or neither for one that does not", KeyUsername, KeyPassword))
	case pass == "":
		r.Problems = append(r.Problems, fmt.Sprintf("data.%s is missing or empty while data.%s is set: give both for a registry that needs credentials, or neither for one that does not", KeyPassword, KeyUsername))
	}
	if t := get(KeyType); t != "" && t != TypeOCI {
		r.Problems = append(r.Problems, fmt.Sprintf("data.%s is not %s", KeyType, TypeOCI))
	}
	if u := get(KeyURL); u != "" && wantURL != "" && !strings.HasPrefix(wantURL, strings.TrimSuffix(u, "/")) {
		r.Problems = append(r.Problems, fmt.Sprintf("data.%s is not a prefix of the registry repository %s", KeyURL, wantURL))
	}
	return r, nil
}

// URL returns the credential URL of a registry repository: oci://<host>/<path>, no trailing
// slash. Argo CD applies it to every chart URL it prefixes.
func URL(repository string) string {
	return "oci://" + strings.TrimSuffix(strings.TrimPrefix(repository, "oci://"), "/")
}
