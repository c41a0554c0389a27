package testenv

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// ArgoCDNamespace is where Argo CD runs and looks for Applications, AppProjects and repository
// Secrets.
const ArgoCDNamespace = "argocd"

// ArgoCD describes the Argo CD of an environment.
type ArgoCD struct {
	// Namespace is ArgoCDNamespace.
	Namespace string
	// RedisAddr, RepoServerAddr are host:port on loopback.
	RedisAddr      string
	RepoServerAddr string
	// ControllerMetricsURL serves the application-controller's /metrics and /healthz.
	ControllerMetricsURL string
}

// Labels Argo CD selects its ConfigMaps and Secrets by.
const (
	argoLabelPartOf     = "app.kubernetes.io/part-of"
	argoLabelName       = "app.kubernetes.io/name"
	argoSecretTypeLabel = "argocd.argoproj.io/secret-type"
)

func (e *Env) startArgoCD(ctx context.Context) error {
	if err := e.createArgoCDObjects(ctx); err != nil {
		return err
	}
	ports, err := FreePorts(4) // redis, repo-server, repo-server metrics, commit-server (never dialled)
	if err != nil {
		return err
	}
	metricsPort, err := freePortAllInterfaces() // the controller's metrics port binds every interface
	if err != nil {
		return err
	}
	redis, repo := "127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1])
	e.ArgoCD = &ArgoCD{
		Namespace:            ArgoCDNamespace,
		RedisAddr:            redis,
		RepoServerAddr:       repo,
		ControllerMetricsURL: "http://127.0.0.1:" + strconv.Itoa(metricsPort),
	}

	redisDir, err := e.path(ProcRedis)
	if err != nil {
		return err
	}
	err = e.launch(ctx, procSpec{
		name: ProcRedis,
		path: e.bin("redis-server"),
		args: []string{"--port", strconv.Itoa(ports[0]), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", redisDir},
	}, argoCDReadyTimeout, func(ctx context.Context) (bool, error) { return redisPing(ctx, redis) })
	if err != nil {
		return err
	}

	repoEnv, err := e.argoEnv("repo-server")
	if err != nil {
		return err
	}
	err = e.launch(ctx, procSpec{
		name: ProcRepoServer,
		path: e.bin("argocd"),
		args: []string{
			"--address", "127.0.0.1", "--port", strconv.Itoa(ports[1]),
			"--metrics-address", "127.0.0.1", "--metrics-port", strconv.Itoa(ports[2]),
			"--redis", redis, "--disable-tls", "--logformat", "text",
		},
		env: append(repoEnv, "ARGOCD_BINARY_NAME=argocd-repo-server"),
	}, argoCDReadyTimeout, func(ctx context.Context) (bool, error) { return tcpOpen(ctx, repo) })
	if err != nil {
		return err
	}

	ctrlEnv, err := e.argoEnv("application-controller")
	if err != nil {
		return err
	}
	resync := strconv.Itoa(int(e.opts.ArgoCDAppResync / time.Second))
	args := []string{
		"--namespace", ArgoCDNamespace,
		"--redis", redis,
		"--repo-server", repo, "--repo-server-plaintext",
		"--commit-server", "127.0.0.1:" + strconv.Itoa(ports[3]),
		"--metrics-port", strconv.Itoa(metricsPort),
		"--app-resync", resync, "--app-resync-jitter", "0",
		"--logformat", "text",
	}
	return e.launch(ctx, procSpec{
		name: ProcAppController,
		path: e.bin("argocd"),
		args: append(args, e.opts.ArgoCDControllerArgs...),
		env:  append(ctrlEnv, "ARGOCD_BINARY_NAME=argocd-application-controller"),
	}, argoCDReadyTimeout, func(ctx context.Context) (bool, error) {
		_, err := httpGet(ctx, e.ArgoCD.ControllerMetricsURL+"/healthz")
		return err == nil, err
	})
}

// argoEnv is the environment of an Argo CD component: in-cluster mode through the kubeconfig,
// and every path Argo CD would otherwise share between stacks (fixed defaults under /tmp, /app,
// /home/argocd or ~) moved into this environment's dir. helm comes first in PATH for the
// repo-server.
func (e *Env) argoEnv(component string) ([]string, error) {
	paths := map[string][]string{
		"ARGOCD_TLS_DATA_PATH":             {"argocd", "tls"},
		"ARGOCD_SSH_DATA_PATH":             {"argocd", "ssh"},
		"ARGOCD_GNUPGHOME":                 {"argocd", "gnupg"},
		"ARGOCD_GPG_DATA_PATH":             {"argocd", "gpg"},
		"ARGOCD_PLUGINSOCKFILEPATH":        {"argocd", "plugins"},
		"ARGOCD_CMP_WORKDIR":               {"argocd", "cmp"},
		"ARGOCD_CONFIG_DIR":                {"argocd", "config"},
		"HELM_CACHE_HOME":                  {"argocd", "helm", "cache"},
		"HELM_CONFIG_HOME":                 {"argocd", "helm", "config"},
		"HELM_DATA_HOME":                   {"argocd", "helm", "data"},
		"TMPDIR":                           {"argocd", "tmp", component},
		"HOME":                             {"argocd", "home", component},
		"ARGOCD_ENABLE_PROFILER_FILE_PATH": nil, // a file that never exists, below
		"ARGOCD_ASK_PASS_SOCK":             nil, // a socket, below
	}
	env := []string{
		"KUBECONFIG=" + e.Kubeconfig,
		"ARGOCD_FAKE_IN_CLUSTER=true",
		"ARGOCD_GPG_ENABLED=false",
		"PATH=" + e.ToolsDir + string(os.PathListSeparator) + os.Getenv("PATH"),
	}
	for k, elem := range paths {
		if elem == nil {
			continue
		}
		p, err := e.path(elem...)
		if err != nil {
			return nil, err
		}
		env = append(env, k+"="+p)
	}
	base := filepath.Join(e.Dir, "argocd")
	env = append(env,
		"ARGOCD_ENABLE_PROFILER_FILE_PATH="+filepath.Join(base, "profiler.enabled"),
		"ARGOCD_ASK_PASS_SOCK="+filepath.Join(base, component+"-askpass.sock"),
	)
	return env, nil
}

// createArgoCDObjects creates what argocd-server and the install manifests would: the namespace,
// argocd-cm, argocd-rbac-cm, argocd-secret and the default AppProject.
func (e *Env) createArgoCDObjects(ctx context.Context) error {
	if err := e.ensureNamespace(ctx, ArgoCDNamespace); err != nil {
		return err
	}
	labels := func(name string) map[string]string {
		return map[string]string{argoLabelPartOf: "argocd", argoLabelName: name}
	}
	resync := e.opts.ArgoCDAppResync.String()
	cms := []*corev1.ConfigMap{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "argocd-cm", Namespace: ArgoCDNamespace, Labels: labels("argocd-cm")},
			Data:       map[string]string{"timeout.reconciliation": resync},
		},
		{ObjectMeta: metav1.ObjectMeta{Name: "argocd-rbac-cm", Namespace: ArgoCDNamespace, Labels: labels("argocd-rbac-cm")}},
	}
	for _, cm := range cms {
		if _, err := e.kube.CoreV1().ConfigMaps(ArgoCDNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create configmap %s: %w", cm.Name, err)
		}
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("generate server secret key: %w", err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "argocd-secret", Namespace: ArgoCDNamespace, Labels: labels("argocd-secret")},
		StringData: map[string]string{"server.secretkey": base64.StdEncoding.EncodeToString(key)},
	}
	if _, err := e.kube.CoreV1().Secrets(ArgoCDNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create secret argocd-secret: %w", err)
	}
	project := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "AppProject",
		"metadata":   map[string]any{"name": "default", "namespace": ArgoCDNamespace},
		"spec": map[string]any{
			"sourceRepos":              []any{"*"},
			"destinations":             []any{map[string]any{"server": "*", "namespace": "*"}},
			"clusterResourceWhitelist": []any{map[string]any{"group": "*", "kind": "*"}},
		},
	}}
	data, err := project.MarshalJSON()
	if err != nil {
		return fmt.Errorf("encode appproject default: %w", err)
	}
	_, err = e.dyn.Resource(AppProjectGVR).Namespace(ArgoCDNamespace).Patch(ctx, "default", types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: fieldManager, Force: ptrTo(true)})
	if err != nil {
		return fmt.Errorf("apply appproject default: %w", err)
	}
	return nil
}

func (e *Env) ensureNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// CreateOCIRepoSecret creates (or replaces) an Argo CD repository Secret named name in the Argo CD
// namespace for url (oci://host:port/path, as in the Applications' repoURL) on the environment's
// plain-HTTP registry: type oci, insecureOCIForceHttp, and the registry's credentials when it has
// any. Without it the repo-server talks HTTPS to the registry.
func (e *Env) CreateOCIRepoSecret(ctx context.Context, name, url string) error {
	if !strings.HasPrefix(url, "oci://") {
		return fmt.Errorf("create repository secret %s: url %q does not start with oci://", name, url)
	}
	if err := e.ensureNamespace(ctx, ArgoCDNamespace); err != nil {
		return err
	}
	data := map[string]string{
		"type":                 "oci",
		"name":                 name,
		"url":                  url,
		"insecureOCIForceHttp": "true",
	}
	if e.Registry != nil && e.Registry.Auth != nil {
		data["username"], data["password"] = e.Registry.Auth.Username, e.Registry.Auth.Password
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ArgoCDNamespace,
			Labels: map[string]string{argoSecretTypeLabel: "repository"},
		},
		StringData: data,
	}
	secrets := e.kube.CoreV1().Secrets(ArgoCDNamespace)
	if _, err := secrets.Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create repository secret %s: %w", name, err)
		}
		if _, err := secrets.Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update repository secret %s: %w", name, err)
		}
	}
	return nil
}

// redisPing reports whether a redis server at addr answers PING.
func redisPing(ctx context.Context, addr string) (bool, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false, fmt.Errorf("dial redis: %w", err)
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return false, fmt.Errorf("ping redis: %w", err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return false, fmt.Errorf("read redis reply: %w", err)
	}
	return strings.TrimSpace(line) == "+PONG", nil
}

// tcpOpen reports whether something accepts TCP connections at addr.
func tcpOpen(ctx context.Context, addr string) (bool, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false, fmt.Errorf("dial %s: %w", addr, err)
	}
	_ = conn.Close()
	return true, nil
}
