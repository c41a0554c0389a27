package testenv

import (
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// UserAgent is the user agent of the environment's clients (Env.Config and the clients made
// from it).
const UserAgent = "aicr-testenv"

// The names inside the generated kubeconfig.
const (
	kubeconfigContext = "aicr-testenv"
	kubeconfigUser    = "admin"
)

// Client rate limits: far above client-go's 5/10 defaults, so that tests creating many objects are
// not throttled on the client side.
const (
	clientQPS   = 500
	clientBurst = 1000
)

// renderKubeconfig returns a self-contained kubeconfig (certificates inline) for server, so a
// kept environment's kubeconfig can be copied and used as is.
func renderKubeconfig(server string, caPEM, certPEM, keyPEM []byte) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[kubeconfigContext] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[kubeconfigUser] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts[kubeconfigContext] = &clientcmdapi.Context{Cluster: kubeconfigContext, AuthInfo: kubeconfigUser}
	cfg.CurrentContext = kubeconfigContext
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("render kubeconfig: %w", err)
	}
	return out, nil
}

// writeKubeconfig writes the kubeconfig to path and returns the matching rest.Config.
func writeKubeconfig(path, server string, p *pki) (*rest.Config, error) {
	data, err := renderKubeconfig(server, p.CACert, p.AdminCert, p.AdminKey)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return nil, fmt.Errorf("write kubeconfig: %w", err)
	}
	return restConfig(server, p), nil
}

func restConfig(server string, p *pki) *rest.Config {
	return &rest.Config{
		Host: server,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   p.CACert,
			CertData: p.AdminCert,
			KeyData:  p.AdminKey,
		},
		QPS:       clientQPS,
		Burst:     clientBurst,
		UserAgent: UserAgent,
	}
}
