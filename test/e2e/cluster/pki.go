package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity is long enough for any test run or demo, short enough to be obviously a test CA.
const certValidity = 30 * 24 * time.Hour

// CA is the cluster's one certificate authority: it signs every serving and client certificate
// (API server, kubelet, and the clients of the API server and the kubelet).
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// newCA makes a self-signed CA.
func newCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

// certSpec describes one leaf certificate.
type certSpec struct {
	cn     string
	orgs   []string
	dns    []string
	ips    []net.IP
	server bool // serving certificate (else client)
}

// issue makes a key and a certificate for spec signed by the CA.
func (ca *CA) issue(spec certSpec) (*x509.Certificate, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	usage := x509.ExtKeyUsageClientAuth
	if spec.server {
		usage = x509.ExtKeyUsageServerAuth
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: spec.cn, Organization: spec.orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     spec.dns,
		IPAddresses:  spec.ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

func certPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func keyPEM(k crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// writePair writes <dir>/<name>.crt and <dir>/<name>.key (0600).
func writePair(dir, name string, c *x509.Certificate, k crypto.Signer) error {
	kp, err := keyPEM(k)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), certPEM(c), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".key"), kp, 0o600)
}

// PKI is every key and certificate the cluster uses, as files under Dir.
type PKI struct {
	Dir string
}

// Path is the file name under the PKI directory.
func (p PKI) Path(name string) string { return filepath.Join(p.Dir, name) }

// A client of the API server: a name for its files and kubeconfig, and its identity.
type client struct {
	file string
	cn   string
	orgs []string
}

// generatePKI writes the CA, the serving certificates (API server, kubelet, controller manager,
// scheduler), the client
// certificates (admin, controller-manager, scheduler, the node, the API server's kubelet client,
// Multus) and the service-account signing key pair.
func generatePKI(dir, nodeName string, serviceIP net.IP, clients []client) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ca, err := newCA("memifnet-cluster-ca")
	if err != nil {
		return err
	}
	if err := writePair(dir, "ca", ca.Cert, ca.Key); err != nil {
		return err
	}
	leaves := []struct {
		file string
		spec certSpec
	}{
		{"apiserver", certSpec{cn: "kube-apiserver", server: true,
			dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			ips: []net.IP{net.IPv4(127, 0, 0, 1), serviceIP}}},
		{"kubelet-serving", certSpec{cn: "system:node:" + nodeName, orgs: []string{"system:nodes"}, server: true,
			dns: []string{"localhost"}, ips: []net.IP{net.IPv4(127, 0, 0, 1)}}},
		{"controller-manager-serving", certSpec{cn: "kube-controller-manager", server: true,
			dns: []string{"localhost"}, ips: []net.IP{net.IPv4(127, 0, 0, 1)}}},
		{"scheduler-serving", certSpec{cn: "kube-scheduler", server: true,
			dns: []string{"localhost"}, ips: []net.IP{net.IPv4(127, 0, 0, 1)}}},
	}
	for _, c := range clients {
		leaves = append(leaves, struct {
			file string
			spec certSpec
		}{c.file, certSpec{cn: c.cn, orgs: c.orgs}})
	}
	for _, l := range leaves {
		c, k, err := ca.issue(l.spec)
		if err != nil {
			return fmt.Errorf("certificate %s: %w", l.file, err)
		}
		if err := writePair(dir, l.file, c, k); err != nil {
			return err
		}
	}
	// Service-account tokens: the API server verifies with the public key, the controller
	// manager and the API server's TokenRequest sign with the private one.
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	kp, err := keyPEM(sa)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), kp, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

// kubeconfig is a kubeconfig for server with the client certificate <name>.crt/.key embedded.
func kubeconfig(p PKI, server, name string) ([]byte, error) {
	read := func(f string) (string, error) {
		b, err := os.ReadFile(p.Path(f))
		if err != nil {
			return "", err
		}
		return b64(b), nil
	}
	ca, err1 := read("ca.crt")
	crt, err2 := read(name + ".crt")
	key, err3 := read(name + ".key")
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: memifnet
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: %s@memifnet
  context:
    cluster: memifnet
    user: %s
current-context: %s@memifnet
`, server, ca, name, crt, key, name, name, name), nil
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// loadCA reads the cluster CA written by generatePKI (to sign the certificates of nodes added
// later).
func loadCA(p PKI) (*CA, error) {
	pair, err := tls.LoadX509KeyPair(p.Path("ca.crt"), p.Path("ca.key"))
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("ca.key: not a signing key")
	}
	return &CA{Cert: cert, Key: key}, nil
}
