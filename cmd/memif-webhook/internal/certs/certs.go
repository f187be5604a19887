// Package certs gives the webhook its TLS identity without cert-manager: a self-signed CA and a
// serving certificate for the webhook's Service, kept in one Secret so that every replica serves
// the same certificate. Issue (run by the leader only) creates them, and replaces them while the
// old ones are still valid: the Secret keeps the previous CA in its bundle until that CA expires,
// so a replica still serving the old certificate stays trusted while the new one spreads.
// Loader (every replica) reads the Secret and serves what it holds.
//
// With cert-manager (Identity.External, docs/webhook.md) the Secret is cert-manager's: Issue
// refuses to touch it, and Loader serves its tls.crt/tls.key and finds the CA in ca.crt.
package certs

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Keys of the Secret: the serving pair under the kubernetes.io/tls names, and the CA bundle the
// webhook configurations must carry (the current CA first, then a previous one still valid).
const (
	KeyCert   = corev1.TLSCertKey
	KeyKey    = corev1.TLSPrivateKeyKey
	KeyBundle = "ca-bundle.crt"
	keyCAKey  = "ca.key"
	// KeyCA is where cert-manager puts the issuing CA (and what its cainjector injects).
	KeyCA = "ca.crt"
)

// Identity is where the certificate lives and what it is for.
type Identity struct {
	Namespace, Secret string
	// Service is the webhook Service's name: the API server checks the certificate for
	// <service>.<namespace>.svc.
	Service string
	// Validity of a new serving certificate (the CA gets the same); replaced once less than a
	// third of it is left.
	Validity time.Duration
	// External: cert-manager writes the Secret (KeyCert, KeyKey, KeyCA) and its cainjector
	// injects the bundle; the webhook only reads it.
	External bool
}

// bundleKey is the Secret key holding the CA(s) the served certificate chains to.
func (id Identity) bundleKey() string {
	if id.External {
		return KeyCA
	}
	return KeyBundle
}

// DNSNames are the names the serving certificate holds.
func (id Identity) DNSNames() []string {
	s := id.Service + "." + id.Namespace
	return []string{id.Service, s, s + ".svc", s + ".svc.cluster.local"}
}

// Issue makes sure the Secret holds a serving certificate for the Service that is not due for
// renewal, creating or renewing it. It returns the bundle to inject and whether it changed the
// Secret.
func Issue(ctx context.Context, cs kubernetes.Interface, id Identity, now time.Time) ([]byte, bool, error) {
	if id.External {
		// Never overwrite cert-manager's Secret, even a damaged one: it repairs it.
		return nil, false, fmt.Errorf("secret %s/%s is cert-manager's (--certificates=external): not issuing", id.Namespace, id.Secret)
	}
	secrets := cs.CoreV1().Secrets(id.Namespace)
	sec, err := secrets.Get(ctx, id.Secret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		data, err := issue(id, now, nil)
		if err != nil {
			return nil, false, err
		}
		sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: id.Secret, Namespace: id.Namespace,
			Labels: map[string]string{"app.kubernetes.io/part-of": "memifnet"}},
			Type: corev1.SecretTypeTLS, Data: data}
		if _, err := secrets.Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			return nil, false, fmt.Errorf("creating secret %s/%s: %w", id.Namespace, id.Secret, err)
		}
		return data[KeyBundle], true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading secret %s/%s: %w", id.Namespace, id.Secret, err)
	}
	if reason := renewal(sec.Data, id, now); reason == "" {
		return sec.Data[KeyBundle], false, nil
	}
	data, err := issue(id, now, sec.Data)
	if err != nil {
		return nil, false, err
	}
	sec.Data = data
	sec.Type = corev1.SecretTypeTLS
	if _, err := secrets.Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		return nil, false, fmt.Errorf("renewing secret %s/%s: %w", id.Namespace, id.Secret, err)
	}
	return data[KeyBundle], true, nil
}

// renewal says why the Secret's certificate must be replaced, or "".
func renewal(data map[string][]byte, id Identity, now time.Time) string {
	pair, err := tls.X509KeyPair(data[KeyCert], data[KeyKey])
	if err != nil {
		return fmt.Sprintf("no usable serving pair: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return err.Error()
	}
	if !slices.Equal(leaf.DNSNames, id.DNSNames()) {
		return "names changed"
	}
	lifetime := leaf.NotAfter.Sub(leaf.NotBefore)
	if leaf.NotAfter.Sub(now) < lifetime/3 {
		return "due"
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(data[KeyBundle]) {
		return "no CA bundle"
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: id.DNSNames()[2], CurrentTime: now}); err != nil {
		return fmt.Sprintf("the bundle does not verify it: %v", err)
	}
	return ""
}

// issue makes a new CA and serving certificate; the bundle keeps old's CA while it is valid.
func issue(id Identity, now time.Time, old map[string][]byte) (map[string][]byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	notBefore := now.Add(-5 * time.Minute) // clock skew between nodes
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "memifnet-webhook-ca@" + now.UTC().Format(time.RFC3339)},
		NotBefore: notBefore, NotAfter: now.Add(id.Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true, IsCA: true, MaxPathLenZero: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: id.DNSNames()[2]},
		DNSNames: id.DNSNames(), NotBefore: notBefore, NotAfter: now.Add(id.Validity),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	caKeyDER, err := x509.MarshalECPrivateKey(caKey)
	if err != nil {
		return nil, err
	}
	bundle := pemBlock("CERTIFICATE", caDER)
	for _, c := range parseCerts(old[KeyBundle]) {
		if now.Before(c.NotAfter) && len(bundle) < 64<<10 {
			bundle = append(bundle, pemBlock("CERTIFICATE", c.Raw)...)
			break // the previous CA only: older ones signed nothing still served
		}
	}
	return map[string][]byte{
		KeyCert:   pemBlock("CERTIFICATE", der),
		KeyKey:    pemBlock("EC PRIVATE KEY", keyDER),
		KeyBundle: bundle,
		keyCAKey:  pemBlock("EC PRIVATE KEY", caKeyDER),
	}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func parseCerts(b []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return out
		}
		if c, err := x509.ParseCertificate(blk.Bytes); err == nil {
			out = append(out, c)
		}
	}
}

// Loader holds the serving certificate the Secret has, for tls.Config.GetCertificate.
type Loader struct {
	mu     sync.RWMutex
	cert   *tls.Certificate
	bundle []byte
}

// Load reads the Secret and swaps in its certificate; changed says whether it was new. Once a
// certificate is served, a new one is swapped in only when trusted(its CA) says the API server
// will accept it (the leader injects the new bundle after writing the Secret): until then the
// old one, still in the bundle, keeps being served.
func (l *Loader) Load(ctx context.Context, cs kubernetes.Interface, id Identity, trusted func(caDER []byte) bool) (changed bool, err error) {
	sec, err := cs.CoreV1().Secrets(id.Namespace).Get(ctx, id.Secret, metav1.GetOptions{})
	if err != nil {
		if id.External && apierrors.IsNotFound(err) {
			return false, fmt.Errorf("reading secret %s/%s: %w (--certificates=external: cert-manager's Certificate %s/%s writes it; is cert-manager installed and the Certificate Ready?)",
				id.Namespace, id.Secret, err, id.Namespace, id.Service)
		}
		return false, fmt.Errorf("reading secret %s/%s: %w", id.Namespace, id.Secret, err)
	}
	pair, ca, err := check(sec.Data, id, time.Now())
	if err != nil {
		return false, fmt.Errorf("secret %s/%s: %w", id.Namespace, id.Secret, err)
	}
	bundle := sec.Data[id.bundleKey()]
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cert != nil && bytes.Equal(l.cert.Certificate[0], pair.Certificate[0]) && bytes.Equal(l.bundle, bundle) {
		return false, nil
	}
	if l.cert != nil && !trusted(ca) {
		return false, nil
	}
	l.cert, l.bundle = pair, bundle
	return true, nil
}

// check parses the serving pair and finds the CA that signed it in the Secret's bundle; the
// errors name the Secret key at fault (someone edited the Secret, or cert-manager has not
// finished writing it).
func check(data map[string][]byte, id Identity, now time.Time) (*tls.Certificate, []byte, error) {
	pair, err := tls.X509KeyPair(data[KeyCert], data[KeyKey])
	if err != nil {
		return nil, nil, fmt.Errorf("keys %s and %s are not a certificate and its private key: %w", KeyCert, KeyKey, err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, fmt.Errorf("key %s: %w", KeyCert, err)
	}
	if err := leaf.VerifyHostname(id.DNSNames()[2]); err != nil {
		return nil, nil, fmt.Errorf("key %s: %w", KeyCert, err)
	}
	if now.After(leaf.NotAfter) {
		return nil, nil, fmt.Errorf("key %s: expired at %s", KeyCert, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	ca := issuer(&pair, data[id.bundleKey()])
	if ca == nil {
		return nil, nil, fmt.Errorf("key %s holds no CA certificate that signed %s", id.bundleKey(), KeyCert)
	}
	return &pair, ca, nil
}

// GetCertificate serves the loaded certificate.
func (l *Loader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.cert == nil {
		return nil, errors.New("no serving certificate loaded yet")
	}
	return l.cert, nil
}

// Issuer is the served certificate's CA certificate (DER), nil before the first Load.
func (l *Loader) Issuer() []byte {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.cert == nil {
		return nil
	}
	return issuer(l.cert, l.bundle)
}

func issuer(cert *tls.Certificate, bundle []byte) []byte {
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil
	}
	for _, c := range parseCerts(bundle) {
		if leaf.CheckSignatureFrom(c) == nil {
			return c.Raw
		}
	}
	return nil
}

// Trusts reports whether a CA bundle (PEM) holds the CA certificate ca (DER).
func Trusts(bundle, ca []byte) bool {
	if ca == nil {
		return false
	}
	return slices.ContainsFunc(parseCerts(bundle), func(c *x509.Certificate) bool { return bytes.Equal(c.Raw, ca) })
}
