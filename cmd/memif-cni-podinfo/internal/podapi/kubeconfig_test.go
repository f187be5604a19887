package podapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"io"
	"io/fs"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memifnet/memifnet/cmd/internal/podquery"
)

// clientCert makes a self-signed client certificate and returns it and its key in PEM.
func clientCert(t *testing.T) (certPEM, keyPEM []byte, cert *x509.Certificate) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "system:node:test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ = x509.ParseCertificate(der)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), cert
}

// server answers with what authenticated the request.
func server(t *testing.T, clientCA *x509.Certificate) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.TLS != nil && len(r.TLS.PeerCertificates) > 0:
			_, _ = io.WriteString(w, "cert "+r.TLS.PeerCertificates[0].Subject.CommonName)
		case r.Header.Get("Authorization") != "":
			_, _ = io.WriteString(w, r.Header.Get("Authorization"))
		default:
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
		}
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	if clientCA != nil {
		srv.TLS.ClientCAs = x509.NewCertPool()
		srv.TLS.ClientCAs.AddCert(clientCA)
		srv.TLS.ClientAuth = tls.VerifyClientCertIfGiven
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func caPEM(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

func write(t *testing.T, dir, name, content string) string {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func get(t *testing.T, path string) string {
	cfg, err := LoadKubeconfig(path, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cfg.Client.Get(cfg.Server + "/api/v1/namespaces/ns/pods/p")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestAuthentication(t *testing.T) {
	certPEM, keyPEM, cert := clientCert(t)
	srv := server(t, cert)
	dir := t.TempDir()
	write(t, dir, "ca.crt", string(caPEM(srv)))
	write(t, dir, "client.crt", string(certPEM))
	write(t, dir, "client.key", string(keyPEM))
	tokenFile := write(t, dir, "token", "rotated-1\n")
	ca64 := base64.StdEncoding.EncodeToString(caPEM(srv))
	head := "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"

	// Inline token and CA data (what the kubelet stand-in's kubeconfig and Multus use).
	kc := write(t, dir, "a", head+"clusters: [{name: k, cluster: {server: '"+srv.URL+"/', certificate-authority-data: "+ca64+"}}]\nusers: [{name: u, user: {token: abc}}]\n")
	if got := get(t, kc); got != "Bearer abc" {
		t.Errorf("token: %q", got)
	}
	// CA and client certificate from files relative to the kubeconfig.
	kc = write(t, dir, "b", head+"clusters: [{name: k, cluster: {server: '"+srv.URL+"', certificate-authority: ca.crt}}]\nusers: [{name: u, user: {client-certificate: client.crt, client-key: client.key}}]\n")
	if got := get(t, kc); got != "cert system:node:test" {
		t.Errorf("client certificate: %q", got)
	}
	// The kubelet's own kubeconfig as kubeadm writes it (/etc/kubernetes/kubelet.conf): one file
	// holding the rotated certificate and its key, named for both (docs/install.md, Multus).
	pair := write(t, dir, "kubelet-client-current.pem", string(certPEM)+string(keyPEM))
	kc = write(t, dir, "kubelet.conf", head+"clusters: [{name: k, cluster: {server: '"+srv.URL+"', certificate-authority-data: "+ca64+"}}]\n"+
		"users: [{name: u, user: {client-certificate: "+pair+", client-key: "+pair+"}}]\n")
	if got := get(t, kc); got != "cert system:node:test" {
		t.Errorf("kubeadm's kubelet.conf: %q", got)
	}
	// tokenFile is read on each request, so a rotated token is used at once.
	kc = write(t, dir, "c", head+"clusters: [{name: k, cluster: {server: '"+srv.URL+"', insecure-skip-tls-verify: true}}]\nusers: [{name: u, user: {tokenFile: "+tokenFile+"}}]\n")
	if got := get(t, kc); got != "Bearer rotated-1" {
		t.Errorf("tokenFile: %q", got)
	}
	write(t, dir, "token", "rotated-2")
	if got := get(t, kc); got != "Bearer rotated-2" {
		t.Errorf("rotated tokenFile: %q", got)
	}
	// JSON is YAML too.
	kc = write(t, dir, "d", `{"current-context":"c","contexts":[{"name":"c","context":{"cluster":"k","user":"u"}}],
		"clusters":[{"name":"k","cluster":{"server":"`+srv.URL+`","certificate-authority-data":"`+ca64+`"}}],"users":[{"name":"u","user":{"token":"j"}}]}`)
	if got := get(t, kc); got != "Bearer j" {
		t.Errorf("json: %q", got)
	}
	// Without the CA the server's certificate is not trusted.
	kc = write(t, dir, "e", head+"clusters: [{name: k, cluster: {server: '"+srv.URL+"'}}]\nusers: [{name: u, user: {token: abc}}]\n")
	cfg, err := LoadKubeconfig(kc, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Client.Get(cfg.Server); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("untrusted server: %v", err)
	}
}

// EKS and GKE node kubeconfigs get their token from an exec credential plugin
// (client.authentication.k8s.io ExecCredential on stdout): the plugin runs, and its token, not
// anything else, reaches the API server.
func TestExecCredential(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer from-exec" {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, `{"metadata":{"name":"p","namespace":"ns","uid":"u1","annotations":{"a":"b"}}}`)
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	plugin := write(t, dir, "aws-iam-authenticator", "#!/bin/sh\n: > "+ran+"\n"+
		`echo '{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"'"$1"'"}}'`+"\n")
	if err := os.Chmod(plugin, 0o700); err != nil {
		t.Fatal(err)
	}
	ca64 := base64.StdEncoding.EncodeToString(caPEM(srv))
	kc := func(token string) string {
		return write(t, dir, "kc-"+token, "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"+
			"clusters: [{name: k, cluster: {server: '"+srv.URL+"', certificate-authority-data: "+ca64+"}}]\n"+
			"users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: "+plugin+", args: ["+token+"], interactiveMode: Never}}}]\n")
	}
	a := Lookup(t.Context(), podquery.Query{Namespace: "ns", Name: "p", UID: "u1", Kubeconfig: kc("from-exec"), TimeoutSeconds: 5})
	if !a.Found || a.Annotations["a"] != "b" {
		t.Fatalf("exec credential: %+v", a)
	}
	if _, err := os.Stat(ran); err != nil {
		t.Fatalf("the credential plugin did not run: %v", err)
	}
	// A plugin that hands out a token the server refuses: not found, and the refusal is named.
	a = Lookup(t.Context(), podquery.Query{Namespace: "ns", Name: "p", UID: "u1", Kubeconfig: kc("wrong"), TimeoutSeconds: 5})
	if a.Found || len(a.Tried) != 1 || !strings.Contains(a.Tried[0], "401") {
		t.Errorf("refused token: %+v", a)
	}
}

// Errors name the kubeconfig, and say what in it is wrong.
func TestRejects(t *testing.T) {
	dir := t.TempDir()
	head := "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
	cluster := "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:6443'}}]\n"
	for name, tc := range map[string]struct{ body, want string }{
		"no context":         {"clusters: []\n", "no configuration has been provided"},
		"bad context":        {"current-context: x\n" + cluster, "context was not found for specified context: x"},
		"half a cert":        {head + cluster + "users: [{name: u, user: {client-certificate-data: YQ==}}]\n", "client-key-data or client-key must be specified"},
		"token on http":      {head + "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:8080'}}]\nusers: [{name: u, user: {token: t}}]\n", "plain-http"},
		"exec on http":       {head + "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:8080'}}]\nusers: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: x, interactiveMode: Never}}}]\n", "plain-http"},
		"exec no apiVersion": {head + cluster + "users: [{name: u, user: {exec: {command: aws}}}]\n", "apiVersion must be specified"},
		"bad CA":             {head + "clusters: [{name: k, cluster: {server: 'https://h', certificate-authority-data: YQ==}}]\nusers: [{name: u, user: {}}]\n", "unable to load root certificates"},
		"missing CA":         {head + "clusters: [{name: k, cluster: {server: 'https://h', certificate-authority: nope.crt}}]\nusers: [{name: u, user: {}}]\n", "nope.crt"},
		"not YAML":           {"{", "yaml"},
	} {
		kc := write(t, dir, "kc", tc.body)
		_, err := LoadKubeconfig(kc, time.Second)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), kc) {
			t.Errorf("%s: error %v, want it to name %s and contain %q", name, err, kc, tc.want)
		}
	}
	absent := filepath.Join(dir, "absent")
	if _, err := LoadKubeconfig(absent, time.Second); err == nil || !strings.Contains(err.Error(), absent) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
