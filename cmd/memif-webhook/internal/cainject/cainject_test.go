package cainject

import (
	"context"
	"testing"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestInject(t *testing.T) {
	ctx := context.Background()
	target := Target{Configuration: "memifnet-webhook", Namespace: "memifnet-system", Service: "memifnet-webhook"}
	ours := admissionregv1.WebhookClientConfig{Service: &admissionregv1.ServiceReference{Namespace: "memifnet-system", Name: "memifnet-webhook"}}
	other := admissionregv1.WebhookClientConfig{Service: &admissionregv1.ServiceReference{Namespace: "x", Name: "y"}, CABundle: []byte("theirs")}
	cs := fake.NewClientset(
		&admissionregv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "memifnet-webhook"},
			Webhooks: []admissionregv1.MutatingWebhook{{Name: "a", ClientConfig: ours}, {Name: "b", ClientConfig: other}}},
		&admissionregv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "memifnet-webhook"},
			Webhooks: []admissionregv1.ValidatingWebhook{{Name: "c", ClientConfig: ours}}})
	b, err := Bundles(ctx, cs, target)
	if err != nil || len(b) != 2 || len(b[0]) != 0 {
		t.Fatalf("bundles before: %q %v", b, err)
	}
	if n, err := Inject(ctx, cs, target, []byte("ca")); err != nil || n != 2 {
		t.Fatalf("Inject: %d %v", n, err)
	}
	if n, err := Inject(ctx, cs, target, []byte("ca")); err != nil || n != 0 {
		t.Fatalf("second Inject changed %d (%v)", n, err)
	}
	b, _ = Bundles(ctx, cs, target)
	if len(b) != 2 || string(b[0]) != "ca" || string(b[1]) != "ca" {
		t.Fatalf("bundles after: %q", b)
	}
	m, _ := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "memifnet-webhook", metav1.GetOptions{})
	if string(m.Webhooks[1].ClientConfig.CABundle) != "theirs" {
		t.Error("a webhook calling another service was changed")
	}
	// Missing configurations are skipped.
	if n, err := Inject(ctx, fake.NewClientset(), target, []byte("ca")); err != nil || n != 0 {
		t.Fatalf("Inject without configurations: %d %v", n, err)
	}
}
