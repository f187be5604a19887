package server

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
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
