package metricsauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"sync"
	"time"
)

// SelfSignedValidity is how long a certificate made at start is valid (the agent makes a new
// one at every start).
const SelfSignedValidity = 365 * 24 * time.Hour

// TLSConfig is the listener's TLS configuration: the certificate and key in certFile and
// keyFile when given (re-read when the certificate file changes, as a renewed Secret is), else
// a self-signed certificate for hosts made now and kept in memory only, as kube-rbac-proxy
// does without one. Clients then skip verification (Prometheus: insecure_skip_verify) or
// are given a certificate by the files.
func TLSConfig(certFile, keyFile string, hosts []string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case certFile == "" && keyFile == "":
		c, err := SelfSigned(hosts, time.Now())
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{c}
	case certFile == "" || keyFile == "":
		return nil, errors.New("metrics TLS: give both the certificate and the key file, or neither (a self-signed certificate)")
	default:
		f := &fileCert{certFile: certFile, keyFile: keyFile}
		if _, err := f.get(nil); err != nil {
			return nil, err
		}
		cfg.GetCertificate = f.get
	}
	return cfg, nil
}

// SelfSigned makes an ECDSA P-256 certificate for hosts (names or IP addresses), valid from an
// hour before now for SelfSignedValidity.
func SelfSigned(hosts []string, now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("metrics TLS: key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("metrics TLS: serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "memif-deviceplugin metrics"},
		NotBefore:    now.Add(-time.Hour), NotAfter: now.Add(SelfSignedValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true, // its own issuer: a client may pin it as its CA
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("metrics TLS: certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// fileCert serves the pair in two files, loaded again when the certificate file's modification
// time or size changes. A pair that does not load (the key not yet renewed beside its
// certificate) keeps the previous one until the next handshake tries again.
type fileCert struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	modTime time.Time
	size    int64
}

func (f *fileCert) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := os.Stat(f.certFile)
	if err == nil && f.cert != nil && st.ModTime().Equal(f.modTime) && st.Size() == f.size {
		return f.cert, nil
	}
	if err == nil {
		var c tls.Certificate
		if c, err = tls.LoadX509KeyPair(f.certFile, f.keyFile); err == nil {
			f.cert, f.modTime, f.size = &c, st.ModTime(), st.Size()
			return f.cert, nil
		}
	}
	if f.cert != nil {
		return f.cert, nil
	}
	return nil, fmt.Errorf("metrics TLS: %w", err)
}
