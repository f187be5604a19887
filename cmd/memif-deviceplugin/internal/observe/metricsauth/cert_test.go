package metricsauth

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// serveTLS serves 200 with cfg (on a listener of its own: httptest would add its own
// certificate); it returns the certificate the client was shown.
func serveTLS(t *testing.T, cfg *tls.Config) *x509.Certificate {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})}
	go func() { _ = srv.Serve(tls.NewListener(lis, cfg)) }()
	defer srv.Close()
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Get("https://" + lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.TLS.PeerCertificates[0]
}

// TestSelfSigned: without files the listener serves a certificate made at start for the hosts,
// which verifies against itself.
func TestSelfSigned(t *testing.T) {
	cfg, err := TLSConfig("", "", []string{"node-a", "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	cert := serveTLS(t, cfg)
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "node-a"}); err != nil {
		t.Fatalf("pinned as its own CA: %v", err)
	}
	if len(cert.IPAddresses) != 1 || !cert.IPAddresses[0].Equal([]byte{127, 0, 0, 1}) {
		t.Errorf("IP SANs %v", cert.IPAddresses)
	}
	if _, err := TLSConfig("cert.pem", "", nil); err == nil {
		t.Error("a certificate without its key was taken")
	}
}

func writePair(t *testing.T, dir string, host string) {
	t.Helper()
	c, err := SelfSigned([]string{host}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	// Written beside, then renamed: as a Secret volume's update swaps the files.
	for name, b := range map[string][]byte{
		"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}),
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}),
	} {
		if err := os.WriteFile(filepath.Join(dir, name+".new"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, name+".new"), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCertificateFiles: given files, the listener serves them, and a renewed pair is served
// from the next handshake on.
func TestCertificateFiles(t *testing.T) {
	dir := t.TempDir()
	writePair(t, dir, "first")
	cfg, err := TLSConfig(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := serveTLS(t, cfg); c.DNSNames[0] != "first" {
		t.Fatalf("serves %v", c.DNSNames)
	}
	writePair(t, dir, "renewed")
	// The renewal must look different to the reload check even within the file system's
	// timestamp granularity.
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(filepath.Join(dir, "tls.crt"), later, later); err != nil {
		t.Fatal(err)
	}
	if c := serveTLS(t, cfg); c.DNSNames[0] != "renewed" {
		t.Fatalf("after renewal serves %v", c.DNSNames)
	}
	if _, err := TLSConfig(filepath.Join(dir, "none.crt"), filepath.Join(dir, "tls.key"), nil); err == nil {
		t.Fatal("a missing certificate file was taken")
	}
}
