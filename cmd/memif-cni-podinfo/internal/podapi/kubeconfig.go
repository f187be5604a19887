package podapi

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Kubeconfig is what a kubeconfig file says about how to call the API server.
type Kubeconfig struct {
	Server string // https://host:port, no trailing slash
	Client *http.Client
}

type file struct {
	CurrentContext string         `json:"current-context"`
	Clusters       []namedCluster `json:"clusters"`
	Users          []namedUser    `json:"users"`
	Contexts       []namedContext `json:"contexts"`
}

type namedCluster struct {
	Name    string  `json:"name"`
	Cluster cluster `json:"cluster"`
}

type cluster struct {
	Server                   string `json:"server"`
	TLSServerName            string `json:"tls-server-name"`
	InsecureSkipTLSVerify    bool   `json:"insecure-skip-tls-verify"`
	CertificateAuthority     string `json:"certificate-authority"`
	CertificateAuthorityData []byte `json:"certificate-authority-data"`
	ProxyURL                 string `json:"proxy-url"`
}

type namedUser struct {
	Name string `json:"name"`
	User user   `json:"user"`
}

type user struct {
	Token                 string          `json:"token"`
	TokenFile             string          `json:"tokenFile"`
	ClientCertificate     string          `json:"client-certificate"`
	ClientCertificateData []byte          `json:"client-certificate-data"`
	ClientKey             string          `json:"client-key"`
	ClientKeyData         []byte          `json:"client-key-data"`
	Username              string          `json:"username"`
	Exec                  json.RawMessage `json:"exec"`
	AuthProvider          json.RawMessage `json:"auth-provider"`
}

type namedContext struct {
	Name    string      `json:"name"`
	Context kubeContext `json:"context"`
}

type kubeContext struct {
	Cluster string `json:"cluster"`
	User    string `json:"user"`
}

// LoadKubeconfig turns a kubeconfig file into an HTTP client for the API server whose requests
// time out after timeout. It reads the subset of the format a node component's kubeconfig uses
// (Multus writes one with a service account token and the cluster CA): the current context's
// cluster (server, CA file or data, TLS server name, insecure-skip-tls-verify) and user (token,
// tokenFile, client certificate and key as files or data). Credential plugins (exec,
// auth-provider) and basic auth are refused with an error that says so. client-go would cover
// them, but it would add about 6 ms to the start of this helper process, which memif-cni waits for.
func LoadKubeconfig(path string, timeout time.Duration) (*Kubeconfig, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f file
	if err := yaml.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	cfg, err := f.build(filepath.Dir(path), timeout)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

func (f *file) build(dir string, timeout time.Duration) (*Kubeconfig, error) {
	if f.CurrentContext == "" {
		return nil, errors.New("no current-context")
	}
	kctx, ok := find(f.Contexts, f.CurrentContext, func(c namedContext) string { return c.Name })
	if !ok {
		return nil, fmt.Errorf("current-context %q is not among the contexts", f.CurrentContext)
	}
	cl, ok := find(f.Clusters, kctx.Context.Cluster, func(c namedCluster) string { return c.Name })
	if !ok {
		return nil, fmt.Errorf("context %q: cluster %q not found", kctx.Name, kctx.Context.Cluster)
	}
	u, ok := find(f.Users, kctx.Context.User, func(u namedUser) string { return u.Name })
	if !ok && kctx.Context.User != "" {
		return nil, fmt.Errorf("context %q: user %q not found", kctx.Name, kctx.Context.User)
	}
	c, usr := cl.Cluster, u.User
	server, err := url.Parse(c.Server)
	if err != nil || server.Host == "" || (server.Scheme != "https" && server.Scheme != "http") {
		return nil, fmt.Errorf("cluster %q: server %q is not an http(s) URL", cl.Name, c.Server)
	}
	switch {
	case len(usr.Exec) > 0 && string(usr.Exec) != "null":
		return nil, fmt.Errorf("user %q: exec credential plugins are not supported; use a token, tokenFile or client certificate", u.Name)
	case len(usr.AuthProvider) > 0 && string(usr.AuthProvider) != "null":
		return nil, fmt.Errorf("user %q: auth-provider is not supported; use a token, tokenFile or client certificate", u.Name)
	case usr.Username != "":
		return nil, fmt.Errorf("user %q: basic auth is not supported; use a token, tokenFile or client certificate", u.Name)
	case c.ProxyURL != "":
		return nil, fmt.Errorf("cluster %q: proxy-url is not supported", cl.Name)
	}

	tlsConf := &tls.Config{ServerName: c.TLSServerName, InsecureSkipVerify: c.InsecureSkipTLSVerify} //nolint:gosec // the kubeconfig asks for it
	ca, err := dataOrFile(c.CertificateAuthorityData, c.CertificateAuthority, dir)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: certificate-authority: %w", cl.Name, err)
	}
	if ca != nil {
		tlsConf.RootCAs = x509.NewCertPool()
		if !tlsConf.RootCAs.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("cluster %q: certificate-authority has no PEM certificate", cl.Name)
		}
	}
	cert, err := dataOrFile(usr.ClientCertificateData, usr.ClientCertificate, dir)
	if err != nil {
		return nil, fmt.Errorf("user %q: client-certificate: %w", u.Name, err)
	}
	key, err := dataOrFile(usr.ClientKeyData, usr.ClientKey, dir)
	if err != nil {
		return nil, fmt.Errorf("user %q: client-key: %w", u.Name, err)
	}
	if (cert == nil) != (key == nil) {
		return nil, fmt.Errorf("user %q: a client certificate needs both certificate and key", u.Name)
	}
	if cert != nil {
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("user %q: client certificate: %w", u.Name, err)
		}
		tlsConf.Certificates = []tls.Certificate{pair}
	}

	var rt http.RoundTripper = &http.Transport{TLSClientConfig: tlsConf}
	switch {
	case usr.Token != "":
		rt = &bearer{token: func() (string, error) { return usr.Token, nil }, next: rt}
	case usr.TokenFile != "":
		// Read on each request: projected service account tokens are rotated in place.
		path := abs(usr.TokenFile, dir)
		rt = &bearer{token: func() (string, error) {
			b, err := os.ReadFile(path)
			return strings.TrimSpace(string(b)), err
		}, next: rt}
	}
	if server.Scheme == "http" && (usr.Token != "" || usr.TokenFile != "") {
		// client-go does not send a token in the clear either.
		return nil, fmt.Errorf("cluster %q: refusing to send a token to a plain-http server", cl.Name)
	}
	return &Kubeconfig{Server: strings.TrimSuffix(c.Server, "/"), Client: &http.Client{Transport: rt, Timeout: timeout}}, nil
}

// bearer adds an Authorization header.
type bearer struct {
	token func() (string, error)
	next  http.RoundTripper
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	tok, err := b.token()
	if err != nil {
		return nil, fmt.Errorf("read token: %w", err)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return b.next.RoundTrip(r)
}

func find[T any](items []T, name string, nameOf func(T) string) (T, bool) {
	for _, it := range items {
		if nameOf(it) == name {
			return it, true
		}
	}
	var zero T
	return zero, false
}

// dataOrFile returns inline data if set, else the file's contents (relative to the kubeconfig's
// directory), else nil.
func dataOrFile(data []byte, path, dir string) ([]byte, error) {
	if len(data) > 0 {
		return data, nil
	}
	if path == "" {
		return nil, nil
	}
	return os.ReadFile(abs(path, dir))
}

func abs(path, dir string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(dir, path)
}
