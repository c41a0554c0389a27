package testenv

import (
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

func TestKubeconfigRoundTrip(t *testing.T) {
	p, err := newPKI()
	if err != nil {
		t.Fatal(err)
	}
	const server = "https://127.0.0.1:6443"
	data, err := renderKubeconfig(server, p.CACert, p.AdminCert, p.AdminKey)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		t.Fatalf("load rendered kubeconfig: %v", err)
	}
	if cfg.Host != server {
		t.Errorf("host = %q, want %q", cfg.Host, server)
	}
	if string(cfg.CAData) != string(p.CACert) || string(cfg.CertData) != string(p.AdminCert) || string(cfg.KeyData) != string(p.AdminKey) {
		t.Error("kubeconfig does not carry the CA, admin certificate and key inline")
	}
	raw, err := clientcmd.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	if raw.CurrentContext != kubeconfigContext {
		t.Errorf("current context = %q, want %q", raw.CurrentContext, kubeconfigContext)
	}
}

func TestWriteKubeconfigRaisesClientLimits(t *testing.T) {
	p, err := newPKI()
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/kubeconfig"
	cfg, err := writeKubeconfig(path, "https://127.0.0.1:1234", p)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS < 100 || cfg.Burst < 200 {
		t.Errorf("QPS/Burst = %v/%v, want well above client-go's 5/10", cfg.QPS, cfg.Burst)
	}
	fromFile, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("load written kubeconfig: %v", err)
	}
	if fromFile.Host != cfg.Host {
		t.Errorf("file host = %q, config host = %q", fromFile.Host, cfg.Host)
	}
}
