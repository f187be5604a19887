// Package kubeconfig writes the kubeconfig memif-cni uses for its API-server fallback: the
// service account's token and CA are copied next to it on the node (the pod's own token path is
// not a stable host path), and the kubeconfig names them by file, so a refreshed token needs no
// new kubeconfig.
package kubeconfig

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/memifnet/memifnet/internal/safefs"
)

// Write writes <dir of path>/token, ca.crt and the kubeconfig at path. changed is false when
// every file already had its content.
func Write(path, saDir, host, port string) (changed bool, err error) {
	if host == "" || port == "" {
		return false, fmt.Errorf("KUBERNETES_SERVICE_HOST/PORT not set: not running in a pod")
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	token, err := os.ReadFile(filepath.Join(saDir, "token"))
	if err != nil {
		return false, err
	}
	ca, err := os.ReadFile(filepath.Join(saDir, "ca.crt"))
	if err != nil {
		return false, err
	}
	// memif-cni runs on the node, where these files are at the same place relative to the
	// kubeconfig: the DaemonSet mounts the node's directory at the same path in this container.
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://%s
    certificate-authority: %s
users:
- name: memif-cni
  user:
    tokenFile: %s
contexts:
- name: memif-cni
  context:
    cluster: local
    user: memif-cni
current-context: memif-cni
`, net.JoinHostPort(host, port), filepath.Join(dir, "ca.crt"), filepath.Join(dir, "token"))
	for _, f := range []struct {
		name string
		data []byte
	}{{"token", token}, {"ca.crt", ca}, {filepath.Base(path), []byte(cfg)}} {
		c, err := writeIfChanged(filepath.Join(dir, f.name), f.data)
		if err != nil {
			return changed, err
		}
		changed = changed || c
	}
	return changed, nil
}

func writeIfChanged(path string, data []byte) (bool, error) {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	return true, safefs.WriteFile(path, data, 0o600, safefs.WriteOptions{Durable: true})
}
