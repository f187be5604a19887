package kubeconfig

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

func TestWriteIsLoadableAndRefreshesTheToken(t *testing.T) {
	sa, node := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(sa, "token"), []byte("token-1"), 0o600)
	os.WriteFile(filepath.Join(sa, "ca.crt"), []byte("-----BEGIN CERTIFICATE-----\n"), 0o644)
	path := filepath.Join(node, "memifnet.d", "memifnet.kubeconfig")
	changed, err := Write(path, sa, "10.96.0.1", "443")
	if err != nil || !changed {
		t.Fatalf("Write: %v %v", changed, err)
	}
	cfg, err := clientcmd.LoadFromFile(path) // what memif-cni's client-go reads
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	cl, au := cfg.Clusters[ctx.Cluster], cfg.AuthInfos[ctx.AuthInfo]
	if cl.Server != "https://10.96.0.1:443" || cl.CertificateAuthority != filepath.Join(node, "memifnet.d", "ca.crt") ||
		au.TokenFile != filepath.Join(node, "memifnet.d", "token") {
		t.Errorf("cluster %+v user %+v", cl, au)
	}
	if changed, _ := Write(path, sa, "10.96.0.1", "443"); changed {
		t.Error("second Write with the same token reported a change")
	}
	os.WriteFile(filepath.Join(sa, "token"), []byte("token-2"), 0o600) // the kubelet rotated it
	if changed, _ := Write(path, sa, "10.96.0.1", "443"); !changed {
		t.Error("rotated token not picked up")
	}
	if b, _ := os.ReadFile(au.TokenFile); string(b) != "token-2" {
		t.Errorf("token file %q", b)
	}
	if fi, _ := os.Stat(au.TokenFile); fi.Mode().Perm() != 0o600 {
		t.Errorf("token mode %v", fi.Mode())
	}
	if _, err := Write(path, sa, "", ""); err == nil {
		t.Error("no error outside a pod")
	}
}
