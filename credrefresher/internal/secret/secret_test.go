package secret_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/aicr-run/aicr-operator/credrefresher/internal/secret"
)

var (
	ref       = secret.Ref{Namespace: "argocd", Name: "aicr-registry"}
	refreshed = time.Date(2026, 5, 1, 6, 0, 0, 0, time.UTC)
	expires   = time.Date(2026, 5, 1, 18, 0, 0, 0, time.UTC)
)

func creds(password string, insecure bool) secret.Creds {
	return secret.Creds{URL: "oci://123456789012.dkr.ecr.us-west-2.amazonaws.com/aicr", Username: "AWS", Password: password,
		InsecureOCIForceHTTP: insecure, RefreshedAt: refreshed, ExpiresAt: expires}
}

func get(t *testing.T, cs *k8sfake.Clientset) *corev1.Secret {
	t.Helper()
	s, err := cs.CoreV1().Secrets(ref.Namespace).Get(context.Background(), ref.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get Secret: %v", err)
	}
	return s
}

func TestWrite(t *testing.T) {
	chartSecret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace,
			Labels:      map[string]string{"argocd.argoproj.io/secret-type": "repo-creds", "team": "platform"},
			Annotations: map[string]string{"helm.sh/resource-policy": "keep"}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"type": []byte("oci"), "url": []byte("oci://old"), "username": []byte("AWS"), "password": []byte("old"),
			"enableOCI": []byte("true")},
	}
	tests := map[string]struct {
		existing   []runtime.Object
		creds      secret.Creds
		wantResult secret.Result
		want       *corev1.Secret
	}{
		"an absent Secret is created with exactly the repo-creds fields": {
			creds:      creds("pw-1", false),
			wantResult: secret.Created,
			want: &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace,
					Labels: map[string]string{"argocd.argoproj.io/secret-type": "repo-creds"},
					Annotations: map[string]string{
						secret.AnnotationRefreshedAt: "2026-05-01T06:00:00Z", secret.AnnotationExpiresAt: "2026-05-01T18:00:00Z"}},
				Type: corev1.SecretTypeOpaque,
				Data: map[string][]byte{"type": []byte("oci"), "url": []byte("oci://123456789012.dkr.ecr.us-west-2.amazonaws.com/aicr"),
					"username": []byte("AWS"), "password": []byte("pw-1")},
			},
		},
		"the chart's Secret is updated and keeps the admin's keys, labels and annotations": {
			existing:   []runtime.Object{chartSecret.DeepCopy()},
			creds:      creds("pw-2", true),
			wantResult: secret.Updated,
			want: &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace,
					Labels: map[string]string{"argocd.argoproj.io/secret-type": "repo-creds", "team": "platform"},
					Annotations: map[string]string{"helm.sh/resource-policy": "keep",
						secret.AnnotationRefreshedAt: "2026-05-01T06:00:00Z", secret.AnnotationExpiresAt: "2026-05-01T18:00:00Z"}},
				Type: corev1.SecretTypeOpaque,
				Data: map[string][]byte{"type": []byte("oci"), "url": []byte("oci://123456789012.dkr.ecr.us-west-2.amazonaws.com/aicr"),
					"username": []byte("AWS"), "password": []byte("pw-2"), "enableOCI": []byte("true"), "insecureOCIForceHttp": []byte("true")},
			},
		},
		"a Secret without the label gets it": {
			existing: []runtime.Object{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace},
				Type: corev1.SecretTypeOpaque}},
			creds:      creds("pw-3", false),
			wantResult: secret.Updated,
			want: &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace,
					Labels: map[string]string{"argocd.argoproj.io/secret-type": "repo-creds"},
					Annotations: map[string]string{
						secret.AnnotationRefreshedAt: "2026-05-01T06:00:00Z", secret.AnnotationExpiresAt: "2026-05-01T18:00:00Z"}},
				Type: corev1.SecretTypeOpaque,
				Data: map[string][]byte{"type": []byte("oci"), "url": []byte("oci://123456789012.dkr.ecr.us-west-2.amazonaws.com/aicr"),
					"username": []byte("AWS"), "password": []byte("pw-3")},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cs := k8sfake.NewClientset(tc.existing...)
			s := &secret.Store{Secrets: cs.CoreV1(), Ref: ref}
			res, err := s.Write(context.Background(), tc.creds)
			if err != nil {
				t.Fatalf("Write: %v", err)
			}
			if res != tc.wantResult {
				t.Errorf("result = %s, want %s", res, tc.wantResult)
			}
			got := get(t, cs)
			// server-side bookkeeping, not what the store wrote
			got.ResourceVersion, got.ManagedFields, got.TypeMeta = "", nil, metav1.TypeMeta{}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Secret (-want +got):\n%s", diff)
			}
			// the same credentials again change nothing
			if res, err := s.Write(context.Background(), tc.creds); err != nil || res != secret.Unchanged {
				t.Errorf("second Write = %s, %v; want unchanged", res, err)
			}
			assertOnlyVerbs(t, cs, "get", "create", "update")
		})
	}
}

// assertOnlyVerbs fails when the store did anything but the verbs given on the one Secret: no
// list, no watch, no other object.
func assertOnlyVerbs(t *testing.T, cs *k8sfake.Clientset, verbs ...string) {
	t.Helper()
	allowed := map[string]bool{}
	for _, v := range verbs {
		allowed[v] = true
	}
	for _, a := range cs.Actions() {
		if !allowed[a.GetVerb()] || a.GetResource().Resource != "secrets" || a.GetNamespace() != ref.Namespace {
			t.Errorf("unexpected action %s %s in %q", a.GetVerb(), a.GetResource().Resource, a.GetNamespace())
		}
		if named, ok := a.(interface{ GetName() string }); ok && named.GetName() != "" && named.GetName() != ref.Name {
			t.Errorf("action %s on Secret %s, want only %s", a.GetVerb(), named.GetName(), ref.Name)
		}
	}
}

func TestWriteRetriesAConflict(t *testing.T) {
	cs := k8sfake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace}})
	conflicts := 1
	cs.PrependReactor("update", "secrets", func(clienttesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, ref.Name, nil)
		}
		return false, nil, nil
	})
	s := &secret.Store{Secrets: cs.CoreV1(), Ref: ref}
	if res, err := s.Write(context.Background(), creds("pw", false)); err != nil || res != secret.Updated {
		t.Fatalf("Write = %s, %v; want updated after the conflict", res, err)
	}
	if got := string(get(t, cs).Data["password"]); got != "pw" {
		t.Errorf("password not written after the conflict")
	}
}

func TestWriteErrorNamesTheSecretNotTheData(t *testing.T) {
	cs := k8sfake.NewClientset()
	cs.PrependReactor("create", "secrets", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, ref.Name, nil)
	})
	s := &secret.Store{Secrets: cs.CoreV1(), Ref: ref}
	_, err := s.Write(context.Background(), creds("pw-never-shown", false))
	if err == nil || !strings.Contains(err.Error(), "write Secret argocd/aicr-registry") || strings.Contains(err.Error(), "pw-never-shown") {
		t.Errorf("error = %v, want it to name the Secret and not the password", err)
	}
}

func TestLastExpiry(t *testing.T) {
	cs := k8sfake.NewClientset()
	s := &secret.Store{Secrets: cs.CoreV1(), Ref: ref}
	if got, err := s.LastExpiry(context.Background()); err != nil || !got.IsZero() {
		t.Errorf("LastExpiry of an absent Secret = %v, %v; want zero", got, err)
	}
	if _, err := s.Write(context.Background(), creds("pw", false)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.LastExpiry(context.Background()); err != nil || !got.Equal(expires) {
		t.Errorf("LastExpiry = %v, %v; want %v", got, err, expires)
	}
}

func TestCheck(t *testing.T) {
	const password = "admin-password-value"
	good := func() *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace, ResourceVersion: "7",
				Labels: map[string]string{"argocd.argoproj.io/secret-type": "repo-creds"}},
			Data: map[string][]byte{"type": []byte("oci"), "url": []byte("oci://registry.example.com/aicr"),
				"username": []byte("robot"), "password": []byte(password)},
		}
	}
	tests := map[string]struct {
		secret  *corev1.Secret
		wantURL string
		want    []string
	}{
		"a complete Secret": {secret: good(), wantURL: "oci://registry.example.com/aicr"},
		"an absent Secret":  {want: []string{"Secret argocd/aicr-registry is not found"}},
		"the label is missing": {
			secret: func() *corev1.Secret { s := good(); s.Labels = nil; return s }(),
			want:   []string{"label argocd.argoproj.io/secret-type is missing (want repo-creds)"},
		},
		"the label says repository": {
			secret: func() *corev1.Secret {
				s := good()
				s.Labels["argocd.argoproj.io/secret-type"] = "repository"
				return s
			}(),
			want: []string{"label argocd.argoproj.io/secret-type is not repo-creds"},
		},
		"empty password and no username: an anonymous registry": {
			secret: func() *corev1.Secret { s := good(); s.Data["password"] = nil; delete(s.Data, "username"); return s }(),
		},
		"empty username and password, as the specification's snippet creates them": {
			secret: func() *corev1.Secret {
				s := good()
				s.Data["password"], s.Data["username"] = []byte{}, []byte{}
				return s
			}(),
		},
		"a username without a password": {
			secret: func() *corev1.Secret { s := good(); delete(s.Data, "password"); return s }(),
			want:   []string{"data.password is missing or empty while data.username is set: give both for a registry that needs credentials, or neither for one that does not"},
		},
		"a password without a username": {
			secret: func() *corev1.Secret { s := good(); s.Data["username"] = nil; return s }(),
			want:   []string{"data.username is missing or empty while data.password is set: give both for a registry that needs credentials, or neither for one that does not"},
		},
		"no url": {
			secret: func() *corev1.Secret { s := good(); delete(s.Data, "url"); return s }(),
			want:   []string{"data.url is missing or empty"},
		},
		"a helm type": {
			secret: func() *corev1.Secret { s := good(); s.Data["type"] = []byte("helm"); return s }(),
			want:   []string{"data.type is not oci"},
		},
		"a url that does not cover the registry repository": {
			secret:  good(),
			wantURL: "oci://other.example.com/aicr",
			want:    []string{"data.url is not a prefix of the registry repository oci://other.example.com/aicr"},
		},
		"written with stringData": {
			secret: func() *corev1.Secret {
				s := good()
				s.StringData = map[string]string{"password": password}
				delete(s.Data, "password")
				return s
			}(),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cs := k8sfake.NewClientset()
			if tc.secret != nil {
				cs = k8sfake.NewClientset(tc.secret)
			}
			s := &secret.Store{Secrets: cs.CoreV1(), Ref: ref}
			rep, err := s.Check(context.Background(), tc.wantURL)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if diff := cmp.Diff(tc.want, rep.Problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if rep.OK() != (len(tc.want) == 0) {
				t.Errorf("OK = %t with problems %v", rep.OK(), rep.Problems)
			}
			if strings.Contains(strings.Join(rep.Problems, " "), password) {
				t.Errorf("problems show the password")
			}
			assertOnlyVerbs(t, cs, "get")
		})
	}
}

func TestURL(t *testing.T) {
	tests := map[string]struct{ repository, want string }{
		"host and path":           {"registry.example.com/aicr", "oci://registry.example.com/aicr"},
		"already oci":             {"oci://registry.example.com/aicr", "oci://registry.example.com/aicr"},
		"a trailing slash is cut": {"127.0.0.1:5000/aicr/", "oci://127.0.0.1:5000/aicr"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := secret.URL(tc.repository); got != tc.want {
				t.Errorf("URL(%q) = %q, want %q", tc.repository, got, tc.want)
			}
		})
	}
}
