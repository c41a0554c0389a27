package testenv

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The fake node kwok manages.
const (
	kwokNodeName       = KwokNodeName
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
	kwokNodeValue      = "fake"
)

// selfSignedProbeClient probes the /healthz of kube-controller-manager and kube-scheduler, which
// serve a self-signed loopback certificate of their own.
var selfSignedProbeClient = &http.Client{Transport: &http.Transport{
	DisableKeepAlives: true,
	TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback health probe only
}}

// kubeconfigArgs are the three kubeconfig flags the kube components need.
func (e *Env) kubeconfigArgs() []string {
	return []string{
		"--kubeconfig=" + e.Kubeconfig,
		"--authentication-kubeconfig=" + e.Kubeconfig,
		"--authorization-kubeconfig=" + e.Kubeconfig,
	}
}

func healthz(port int) func(context.Context) (bool, error) {
	url := "https://127.0.0.1:" + strconv.Itoa(port) + "/healthz"
	return func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, fmt.Errorf("build request: %w", err)
		}
		body, err := doProbe(selfSignedProbeClient, req, http.StatusOK)
		return err == nil && body == "ok", err
	}
}

func (e *Env) startControllerManager(ctx context.Context) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	certDir, err := e.path(ProcControllerManager)
	if err != nil {
		return err
	}
	f := e.files
	spec := procSpec{
		name: ProcControllerManager,
		path: e.bin("kube-controller-manager"),
		args: append(e.kubeconfigArgs(),
			"--bind-address=127.0.0.1",
			"--secure-port="+strconv.Itoa(port),
			"--cert-dir="+certDir,
			"--leader-elect=false",
			"--controllers=*",
			"--use-service-account-credentials=false",
			"--service-account-private-key-file="+f.SAKey,
			"--root-ca-file="+f.CACert,
			"--cluster-signing-cert-file="+f.CACert,
			"--cluster-signing-key-file="+f.CAKey,
		),
	}
	probe := healthz(port)
	// ready once the default ServiceAccount exists: pods cannot be created before it does
	return e.launch(ctx, spec, controllerReadyTimeout, func(ctx context.Context) (bool, error) {
		if ok, err := probe(ctx); !ok {
			return false, err
		}
		_, err := e.kube.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	})
}

func (e *Env) startScheduler(ctx context.Context) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	certDir, err := e.path(ProcScheduler)
	if err != nil {
		return err
	}
	spec := procSpec{
		name: ProcScheduler,
		path: e.bin("kube-scheduler"),
		args: append(e.kubeconfigArgs(),
			"--bind-address=127.0.0.1",
			"--secure-port="+strconv.Itoa(port),
			"--cert-dir="+certDir,
			"--leader-elect=false",
		),
	}
	return e.launch(ctx, spec, controllerReadyTimeout, healthz(port))
}

func (e *Env) startKwok(ctx context.Context) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	dir, err := e.path(ProcKwok)
	if err != nil {
		return err
	}
	config, err := kwokConfig(filepath.Join(e.ToolsDir, "stages"))
	if err != nil {
		return err
	}
	configPath := filepath.Join(dir, "stages.yaml")
	if err := os.WriteFile(configPath, config, 0o600); err != nil {
		return fmt.Errorf("write kwok config: %w", err)
	}
	if _, err := e.kube.CoreV1().Nodes().Create(ctx, kwokNode(kwokNodeName), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create node %s: %w", kwokNodeName, err)
	}
	e.NodeName = kwokNodeName
	// A kwok process names itself hostname_<uuid> and waits for a node lease held by another name
	// to expire (--node-lease-duration-seconds). A restarted kwok would sit out its predecessor's
	// lease, so drop it first.
	e.mu.Lock()
	e.restart[ProcKwok] = func(ctx context.Context) error {
		err := e.kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, kwokNodeName, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete node lease %s: %w", kwokNodeName, err)
		}
		return nil
	}
	e.mu.Unlock()
	spec := procSpec{
		name: ProcKwok,
		path: e.bin("kwok"),
		args: []string{
			"--kubeconfig=" + e.Kubeconfig,
			"--config=" + configPath,
			"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=" + kwokNodeValue,
			"--node-lease-duration-seconds=40",
			"--server-address=127.0.0.1:" + strconv.Itoa(port),
			"--node-ip=127.0.0.1",
		},
		// kwok reads ~/.kwok/kwok.yaml when it exists: give it a home of its own
		env: []string{"HOME=" + dir},
	}
	return e.launch(ctx, spec, nodeReadyTimeout, e.kwokReady)
}

// kwokReady reports whether a kwok process manages the node: it holds the node's lease and
// the node is Ready. The node alone would not do: after a short stop it is still Ready from
// the kwok before, so a restart would count as ready before the new process did anything, or
// even if it exited at once. No lease is left from the kwok before (the restart drops it).
func (e *Env) kwokReady(ctx context.Context) (bool, error) {
	lease, err := e.kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, kwokNodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, fmt.Errorf("no lease %s/%s yet", corev1.NamespaceNodeLease, kwokNodeName)
	}
	if err != nil {
		return false, err
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		return false, fmt.Errorf("lease %s/%s has no holder", corev1.NamespaceNodeLease, kwokNodeName)
	}
	n, err := e.kube.CoreV1().Nodes().Get(ctx, kwokNodeName, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue, nil
		}
	}
	return false, nil
}

// kwokConfig concatenates the Stage documents in dir (the standalone kwok binary has none built
// in and refuses to start without them).
func kwokConfig(dir string) ([]byte, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("find kwok stages in %s: none found", dir)
	}
	slices.Sort(files)
	var out bytes.Buffer
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read kwok stage: %w", err)
		}
		out.WriteString("---\n")
		out.Write(bytes.TrimPrefix(data, []byte("---\n")))
		if !bytes.HasSuffix(data, []byte("\n")) {
			out.WriteByte('\n')
		}
	}
	return out.Bytes(), nil
}

// kwokNode is a fake node with room for many pods and no taints.
func kwokNode(name string) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{kwokNodeAnnotation: kwokNodeValue, "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{
				"kubernetes.io/arch":            "amd64",
				"kubernetes.io/os":              "linux",
				"kubernetes.io/hostname":        name,
				"kubernetes.io/role":            "agent",
				"node-role.kubernetes.io/agent": "",
				"type":                          "kwok",
			},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
}

// KwokNodeName is the name of the fake node kwok manages (Env.NodeName with Options.Kwok).
const KwokNodeName = "kwok-node-0"
