package podapi

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Kubeconfig is what a kubeconfig file says about how to call the API server.
type Kubeconfig struct {
	Server string // https://host:port[/prefix], no trailing slash
	Client *http.Client
}

// LoadKubeconfig turns a kubeconfig file into an HTTP client for the API server whose requests
// time out after timeout, with client-go's loader: whatever kubeadm, EKS, GKE or Multus write
// (exec credential plugins, tokenFile re-read as it rotates, client certificates, CA files
// relative to the kubeconfig, proxy-url). Only the file is read: not $KUBECONFIG, and no
// in-cluster fallback, so under a Multus daemon a broken file is an error, not the daemon's own
// service account. The cost is helper start-up, paid only when the runtime passes no annotations
// (docs/cni.md).
func LoadKubeconfig(path string, timeout time.Duration) (*Kubeconfig, error) {
	raw, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if err := clientcmd.ResolveLocalPaths(raw); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, raw.CurrentContext, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	server, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if server.Scheme != "https" && hasCredentials(raw) {
		// client-go drops them silently and asks anonymously; say why instead.
		return nil, fmt.Errorf("kubeconfig %s: refusing to send credentials to the plain-http server %s", path, server)
	}
	cfg.Timeout = timeout
	cfg.UserAgent = UserAgent
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return &Kubeconfig{Server: strings.TrimSuffix(server.String(), "/"), Client: hc}, nil
}

// hasCredentials says whether the current context's user has any way to authenticate.
func hasCredentials(c *clientcmdapi.Config) bool {
	kctx := c.Contexts[c.CurrentContext]
	if kctx == nil {
		return false
	}
	u := c.AuthInfos[kctx.AuthInfo]
	return u != nil && (u.Token != "" || u.TokenFile != "" || u.Exec != nil || u.AuthProvider != nil ||
		u.Username != "" || u.Password != "" || u.ClientCertificate != "" || len(u.ClientCertificateData) > 0)
}
