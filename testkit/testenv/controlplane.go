package testenv

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// serviceAccountIssuer is the issuer of service-account tokens (what a real cluster uses).
const serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// probeClient is the plain-HTTP client of readiness probes; each probe has its own context.
var probeClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

func (e *Env) setupPKI(context.Context) error {
	p, err := newPKI()
	if err != nil {
		return err
	}
	files, err := p.writeFiles(filepath.Join(e.Dir, "pki"))
	if err != nil {
		return err
	}
	e.pki, e.files = p, files
	e.CAFile, e.CAPEM = files.CACert, p.CACert
	return nil
}

func (e *Env) startEtcd(ctx context.Context) error {
	ports, err := FreePorts(3)
	if err != nil {
		return err
	}
	client, peer, metrics := "http://127.0.0.1:"+strconv.Itoa(ports[0]), "http://127.0.0.1:"+strconv.Itoa(ports[1]), "http://127.0.0.1:"+strconv.Itoa(ports[2])
	data, err := e.path("etcd")
	if err != nil {
		return err
	}
	e.EtcdURL = client
	spec := procSpec{
		name: ProcEtcd,
		path: e.bin("etcd"),
		args: []string{
			"--name=default",
			"--data-dir=" + data,
			"--listen-client-urls=" + client,
			"--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer,
			"--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=default=" + peer,
			"--listen-metrics-urls=" + metrics,
			// tests only: no fsync makes etcd cheap on slow, shared disks
			"--unsafe-no-fsync",
		},
	}
	spec.args = append(spec.args, e.opts.EtcdArgs...)
	return e.launch(ctx, spec, etcdReadyTimeout, func(ctx context.Context) (bool, error) {
		body, err := httpGet(ctx, client+"/health")
		if err != nil {
			return false, err
		}
		return strings.Contains(body, `"health":"true"`), nil
	})
}

func (e *Env) startAPIServer(ctx context.Context) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	certDir, err := e.path("apiserver")
	if err != nil {
		return err
	}
	e.APIServerURL = "https://127.0.0.1:" + strconv.Itoa(port)
	e.Kubeconfig = filepath.Join(e.Dir, "kubeconfig")
	if e.Config, err = writeKubeconfig(e.Kubeconfig, e.APIServerURL, e.pki); err != nil {
		return err
	}
	if e.kube, err = kubernetes.NewForConfig(e.Config); err != nil {
		return fmt.Errorf("create kubernetes client: %w", err)
	}
	if e.dyn, err = dynamic.NewForConfig(e.Config); err != nil {
		return fmt.Errorf("create dynamic client: %w", err)
	}
	f := e.files
	args := []string{
		"--etcd-servers=" + e.EtcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + certDir,
		// the only address is loopback: no useful endpoints for the kubernetes Service
		"--endpoint-reconciler-type=none",
		"--tls-cert-file=" + f.ServingCert,
		"--tls-private-key-file=" + f.ServingKey,
		"--client-ca-file=" + f.CACert,
		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-account-key-file=" + f.SAPub,
		"--service-account-signing-key-file=" + f.SAKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=RBAC",
		"--allow-privileged=true",
		// on by default; named so a test of admission webhooks and policies can rely on them
		"--enable-admission-plugins=MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ValidatingAdmissionPolicy",
	}
	spec := procSpec{name: ProcAPIServer, path: e.bin("kube-apiserver"), args: append(args, e.opts.APIServerArgs...)}
	rc := e.kube.Discovery().RESTClient()
	return e.launch(ctx, spec, apiServerReadyTimeout, func(ctx context.Context) (bool, error) {
		body, err := rc.Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return false, fmt.Errorf("get /readyz: %w", err)
		}
		return strings.TrimSpace(string(body)) == "ok", nil
	})
}

// httpGet returns the body of a 200 answer to GET url.
func httpGet(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("build request: %w", err)
	}
	return doProbe(probeClient, req, http.StatusOK)
}

func doProbe(c *http.Client, req *http.Request, want ...int) (string, error) {
	resp, err := c.Do(req)
	if err != nil {
		return "", fmt.Errorf("get %s: %w", req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", req.URL, err)
	}
	for _, code := range want {
		if resp.StatusCode == code {
			return string(body), nil
		}
	}
	return "", fmt.Errorf("get %s: status %d: %s", req.URL, resp.StatusCode, strings.TrimSpace(string(body)))
}
