package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

var id = Identity{Namespace: "memifnet-system", Secret: "memifnet-webhook-tls", Service: "memifnet-webhook", Validity: 90 * 24 * time.Hour}

func verify(t *testing.T, certPEM, bundle []byte, now time.Time) error {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		t.Fatal("bundle holds no certificate")
	}
	leaf := parseCerts(certPEM)[0]
	_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "memifnet-webhook.memifnet-system.svc", CurrentTime: now})
	return err
}

// The first Issue creates the Secret; later ones keep it until a third of the lifetime is left,
// then renew it with a bundle that still trusts the previous certificate.
func TestIssueAndRenew(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	now := time.Now()
	bundle, changed, err := Issue(ctx, cs, id, now)
	if err != nil || !changed {
		t.Fatalf("first Issue: %v, changed %v", err, changed)
	}
	sec, _ := cs.CoreV1().Secrets(id.Namespace).Get(ctx, id.Secret, metav1.GetOptions{})
	first := sec.Data[KeyCert]
	if err := verify(t, first, bundle, now); err != nil {
		t.Fatalf("served certificate does not verify for the Service name: %v", err)
	}
	if _, err := tls.X509KeyPair(sec.Data[KeyCert], sec.Data[KeyKey]); err != nil || sec.Type != "kubernetes.io/tls" {
		t.Fatalf("secret type %s, pair %v", sec.Type, err)
	}
	again, changed, err := Issue(ctx, cs, id, now.Add(50*24*time.Hour))
	if err != nil || changed || string(again) != string(bundle) {
		t.Fatalf("Issue within the lifetime changed the secret (%v, %v)", changed, err)
	}
	later := now.Add(61 * 24 * time.Hour) // less than a third (30 days) left
	renewed, changed, err := Issue(ctx, cs, id, later)
	if err != nil || !changed {
		t.Fatalf("renewal: %v, changed %v", err, changed)
	}
	sec, _ = cs.CoreV1().Secrets(id.Namespace).Get(ctx, id.Secret, metav1.GetOptions{})
	if string(sec.Data[KeyCert]) == string(first) {
		t.Fatal("renewal kept the certificate")
	}
	if len(parseCerts(renewed)) != 2 {
		t.Fatalf("renewed bundle holds %d CAs, want the new and the previous", len(parseCerts(renewed)))
	}
	for name, c := range map[string][]byte{"old": first, "new": sec.Data[KeyCert]} {
		if err := verify(t, c, renewed, later); err != nil {
			t.Errorf("%s certificate does not verify with the renewed bundle: %v", name, err)
		}
	}
	// A broken secret (someone edited it) is replaced.
	sec.Data[KeyKey] = []byte("garbage")
	cs.CoreV1().Secrets(id.Namespace).Update(ctx, sec, metav1.UpdateOptions{})
	if _, changed, err := Issue(ctx, cs, id, later); err != nil || !changed {
		t.Fatalf("broken secret not replaced: %v, %v", err, changed)
	}
}

func TestLoader(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	var l Loader
	if _, err := l.GetCertificate(nil); err == nil {
		t.Fatal("a certificate before Load")
	}
	if _, err := l.Load(ctx, cs, id, func([]byte) bool { return true }); err == nil {
		t.Fatal("Load without a secret succeeded")
	}
	bundle, _, err := Issue(ctx, cs, id, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := l.Load(ctx, cs, id, func([]byte) bool { return true }); err != nil || !changed {
		t.Fatalf("Load: %v %v", changed, err)
	}
	if changed, err := l.Load(ctx, cs, id, func([]byte) bool { return true }); err != nil || changed {
		t.Fatalf("second Load: %v %v", changed, err)
	}
	if c, err := l.GetCertificate(nil); err != nil || c == nil {
		t.Fatal(err)
	}
	if !Trusts(bundle, l.Issuer()) || Trusts([]byte("x"), l.Issuer()) || Trusts(bundle, nil) {
		t.Fatal("Trusts/Issuer disagree with the bundle")
	}
}

// External mode: Issue never creates or overwrites cert-manager's Secret, not even a damaged
// one (cert-manager repairs it), and says why.
func TestIssueExternalWritesNothing(t *testing.T) {
	ctx := context.Background()
	ext := id
	ext.External = true
	damaged := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: id.Namespace, Name: id.Secret},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{KeyCert: []byte("garbage"), KeyKey: []byte("garbage"), KeyCA: []byte("garbage")}}
	for name, cs := range map[string]*fake.Clientset{"missing": fake.NewClientset(), "damaged": fake.NewClientset(damaged)} {
		cs.ClearActions()
		_, changed, err := Issue(ctx, cs, ext, time.Now())
		if err == nil || changed || !strings.Contains(err.Error(), "is cert-manager's (--certificates=external): not issuing") {
			t.Errorf("%s: Issue in external mode: changed %v, err %v", name, changed, err)
		}
		if n := len(cs.Actions()); n != 0 {
			t.Errorf("%s: Issue in external mode made %d API calls", name, n)
		}
	}
	// Loader: a missing Secret says who writes it.
	var l Loader
	if _, err := l.Load(ctx, fake.NewClientset(), ext, nil); err == nil || !strings.Contains(err.Error(), "cert-manager's Certificate memifnet-system/memifnet-webhook writes it") {
		t.Errorf("Load without cert-manager's Secret: %v", err)
	}
}
