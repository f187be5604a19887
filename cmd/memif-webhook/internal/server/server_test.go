package server

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/memifnet/memifnet/cmd/memif-webhook/internal/cainject"
	"github.com/memifnet/memifnet/cmd/memif-webhook/internal/certs"
)

// A replica is ready only when it serves a certificate and every configuration trusts it: the
// leader's passes (issue, inject) make it so, in either order of the replica's own pass.
func TestReadiness(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	id := certs.Identity{Namespace: "ns", Secret: "s", Service: "svc", Validity: 24 * time.Hour}
	target := cainject.Target{Configuration: "cfg", Namespace: "ns", Service: "svc"}
	cc := admissionregv1.WebhookClientConfig{Service: &admissionregv1.ServiceReference{Namespace: "ns", Name: "svc"}}
	cs := fake.NewClientset()
	var l certs.Loader
	step := func(want string) {
		t.Helper()
		if got := readiness(ctx, cs, &l, id, target, log); !strings.Contains(got, want) || (want == "" && got != "") {
			t.Fatalf("readiness %q, want %q", got, want)
		}
	}
	step("reading secret ns/s")
	bundle, _, err := certs.Issue(ctx, cs, id, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	step("no webhook configuration cfg calls service ns/svc")
	cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Webhooks: []admissionregv1.MutatingWebhook{{Name: "m", ClientConfig: cc}}}, metav1.CreateOptions{})
	cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Webhooks: []admissionregv1.ValidatingWebhook{{Name: "v", ClientConfig: cc}}}, metav1.CreateOptions{})
	step("do not trust")
	if _, err := cainject.Inject(ctx, cs, target, bundle); err != nil {
		t.Fatal(err)
	}
	step("")
	first := l.Issuer()
	// Renewed: the replica keeps serving the old certificate (still trusted, still ready) until
	// the new bundle is injected, then switches.
	renewed, changed, err := certs.Issue(ctx, cs, id, time.Now().Add(20*time.Hour))
	if err != nil || !changed {
		t.Fatalf("renewal: %v %v", changed, err)
	}
	step("")
	if string(l.Issuer()) != string(first) {
		t.Fatal("switched to the new certificate before the configurations trust it")
	}
	if _, err := cainject.Inject(ctx, cs, target, renewed); err != nil {
		t.Fatal(err)
	}
	step("")
	if string(l.Issuer()) == string(first) || !certs.Trusts(renewed, first) {
		t.Fatal("the new certificate is not served after injection, or the new bundle dropped the old CA")
	}
}

// cmCA is a CA as cert-manager's CA Issuer holds it; secret writes a Secret as cert-manager does
// (kubernetes.io/tls with tls.crt, tls.key and ca.crt, the key PKCS#1/SEC1 encoded).
type cmCA struct {
	key  *ecdsa.PrivateKey
	cert *x509.Certificate
	pem  []byte
}

func newCA(t *testing.T, cn string) cmCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return cmCA{key, c, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (ca cmCA) secret(t *testing.T, dnsNames ...string) *corev1.Secret {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, DNSNames: dnsNames, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(12 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}, Type: corev1.SecretTypeTLS, Data: map[string][]byte{
		"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		"ca.crt":  ca.pem,
	}}
}

// --certificates=external: the replica serves the Secret cert-manager writes, picks up its
// rotations, is ready only once the configurations (cainjector) trust it, reports a damaged
// Secret naming the key, and never writes the Secret or the configurations.
func TestReadinessExternal(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	id := certs.Identity{Namespace: "ns", Secret: "s", Service: "svc", Validity: 24 * time.Hour, External: true}
	target := cainject.Target{Configuration: "cfg", Namespace: "ns", Service: "svc"}
	cc := admissionregv1.WebhookClientConfig{Service: &admissionregv1.ServiceReference{Namespace: "ns", Name: "svc"}}
	cs := fake.NewClientset(
		&admissionregv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Webhooks: []admissionregv1.MutatingWebhook{{Name: "m", ClientConfig: cc}}},
		&admissionregv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Webhooks: []admissionregv1.ValidatingWebhook{{Name: "v", ClientConfig: cc}}})
	var l certs.Loader
	names := []string{"svc", "svc.ns", "svc.ns.svc", "svc.ns.svc.cluster.local"}
	step := func(want string) {
		t.Helper()
		cs.ClearActions()
		if got := readiness(ctx, cs, &l, id, target, log); !strings.Contains(got, want) || (want == "" && got != "") {
			t.Fatalf("readiness %q, want %q", got, want)
		}
		for _, a := range cs.Actions() {
			if a.GetVerb() != "get" {
				t.Fatalf("external mode wrote: %s %s", a.GetVerb(), a.GetResource().Resource)
			}
		}
	}
	served := func() []byte {
		c, err := l.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.Certificate[0]
	}
	leafOf := func(s *corev1.Secret) []byte {
		b, _ := pem.Decode(s.Data["tls.crt"])
		return b.Bytes
	}
	write := func(s *corev1.Secret) {
		t.Helper()
		if _, err := cs.CoreV1().Secrets("ns").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	step("cert-manager's Certificate ns/svc writes it")
	ca := newCA(t, "ca1")
	first := ca.secret(t, names...)
	if _, err := cs.CoreV1().Secrets("ns").Create(ctx, first, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	step("cert-manager's cainjector injects ca.crt of secret ns/s")
	// The leader's work in external mode writes nothing (cert-manager's job).
	cs.ClearActions()
	certPass(ctx, cs, id, target, log)
	for _, a := range cs.Actions() {
		if a.GetVerb() != "get" {
			t.Fatalf("certPass in external mode: %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
	if _, err := cainject.Inject(ctx, cs, target, ca.pem); err != nil { // as the cainjector does
		t.Fatal(err)
	}
	step("")
	if !bytes.Equal(served(), leafOf(first)) {
		t.Fatal("not serving the Secret's certificate")
	}

	// cert-manager renews the certificate (same CA): served at the next pass, no restart. Its CA
	// Issuer may append the CA to tls.crt (a chain): still the same leaf and CA.
	renewed := ca.secret(t, names...)
	renewed.Data["tls.crt"] = append(renewed.Data["tls.crt"], ca.pem...)
	write(renewed)
	step("")
	if !bytes.Equal(served(), leafOf(renewed)) {
		t.Fatal("the renewed certificate is not served")
	}

	// A new CA: the old certificate is served until the cainjector has injected the new ca.crt.
	ca2 := newCA(t, "ca2")
	rotated := ca2.secret(t, names...)
	write(rotated)
	step("")
	if !bytes.Equal(served(), leafOf(renewed)) {
		t.Fatal("switched to a certificate the configurations do not trust")
	}
	if _, err := cainject.Inject(ctx, cs, target, ca2.pem); err != nil {
		t.Fatal(err)
	}
	step("")
	if !bytes.Equal(served(), leafOf(rotated)) {
		t.Fatal("the certificate of the new CA is not served after injection")
	}

	// Damaged Secrets: a clear error naming the key, the last good certificate stays served,
	// and nothing is written (step checks).
	for name, damage := range map[string]struct {
		edit func(*corev1.Secret)
		want string
	}{
		"garbage key":     {func(s *corev1.Secret) { s.Data["tls.key"] = []byte("garbage") }, "secret ns/s: keys tls.crt and tls.key are not a certificate and its private key"},
		"no ca.crt":       {func(s *corev1.Secret) { delete(s.Data, "ca.crt") }, "secret ns/s: key ca.crt holds no CA certificate that signed tls.crt"},
		"foreign ca.crt":  {func(s *corev1.Secret) { s.Data["ca.crt"] = ca.pem }, "key ca.crt holds no CA certificate that signed tls.crt"},
		"wrong dns names": {func(s *corev1.Secret) { *s = *ca2.secret(t, "other.ns.svc") }, "secret ns/s: key tls.crt: x509: certificate is valid for other.ns.svc, not svc.ns.svc"},
	} {
		s := rotated.DeepCopy()
		damage.edit(s)
		s.Name, s.Namespace = "s", "ns"
		write(s)
		step(damage.want)
		if !bytes.Equal(served(), leafOf(rotated)) {
			t.Fatalf("%s: stopped serving the last good certificate", name)
		}
		got, _ := cs.CoreV1().Secrets("ns").Get(ctx, "s", metav1.GetOptions{})
		if !reflect.DeepEqual(got.Data, s.Data) {
			t.Fatalf("%s: the damaged Secret was changed", name)
		}
	}
}
