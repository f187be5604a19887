// Package cainject keeps the webhook's CA bundle in its own MutatingWebhookConfiguration and
// ValidatingWebhookConfiguration: every webhook there that calls the webhook's Service gets the
// bundle from the Secret (package certs). Re-applying the manifests does not undo it (the
// manifests set no caBundle), and a deleted and re-created configuration gets it back on the
// next pass.
package cainject

import (
	"bytes"
	"context"
	"fmt"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Target names the configurations (both kinds share the name) and the Service their webhooks call.
type Target struct {
	Configuration      string
	Namespace, Service string
}

func (t Target) ours(s *admissionregv1.ServiceReference) bool {
	return s != nil && s.Namespace == t.Namespace && s.Name == t.Service
}

// Inject sets bundle on every webhook of the target's configurations that calls its Service, and
// reports how many configurations it changed. A configuration that does not exist is skipped.
func Inject(ctx context.Context, cs kubernetes.Interface, t Target, bundle []byte) (int, error) {
	changed := 0
	ar := cs.AdmissionregistrationV1()
	m, err := ar.MutatingWebhookConfigurations().Get(ctx, t.Configuration, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return changed, fmt.Errorf("reading MutatingWebhookConfiguration %s: %w", t.Configuration, err)
	default:
		dirty := false
		for i := range m.Webhooks {
			cc := &m.Webhooks[i].ClientConfig
			if t.ours(cc.Service) && !bytes.Equal(cc.CABundle, bundle) {
				cc.CABundle, dirty = bundle, true
			}
		}
		if dirty {
			if _, err := ar.MutatingWebhookConfigurations().Update(ctx, m, metav1.UpdateOptions{}); err != nil {
				return changed, fmt.Errorf("updating MutatingWebhookConfiguration %s: %w", t.Configuration, err)
			}
			changed++
		}
	}
	v, err := ar.ValidatingWebhookConfigurations().Get(ctx, t.Configuration, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return changed, fmt.Errorf("reading ValidatingWebhookConfiguration %s: %w", t.Configuration, err)
	default:
		dirty := false
		for i := range v.Webhooks {
			cc := &v.Webhooks[i].ClientConfig
			if t.ours(cc.Service) && !bytes.Equal(cc.CABundle, bundle) {
				cc.CABundle, dirty = bundle, true
			}
		}
		if dirty {
			if _, err := ar.ValidatingWebhookConfigurations().Update(ctx, v, metav1.UpdateOptions{}); err != nil {
				return changed, fmt.Errorf("updating ValidatingWebhookConfiguration %s: %w", t.Configuration, err)
			}
			changed++
		}
	}
	return changed, nil
}

// Bundles returns the CA bundles of every webhook of the target's configurations that calls its
// Service (a missing configuration gives none): a replica is ready when each one trusts its
// certificate.
func Bundles(ctx context.Context, cs kubernetes.Interface, t Target) ([][]byte, error) {
	var out [][]byte
	ar := cs.AdmissionregistrationV1()
	m, err := ar.MutatingWebhookConfigurations().Get(ctx, t.Configuration, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	if err == nil {
		for _, w := range m.Webhooks {
			if t.ours(w.ClientConfig.Service) {
				out = append(out, w.ClientConfig.CABundle)
			}
		}
	}
	v, err := ar.ValidatingWebhookConfigurations().Get(ctx, t.Configuration, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	if err == nil {
		for _, w := range v.Webhooks {
			if t.ours(w.ClientConfig.Service) {
				out = append(out, w.ClientConfig.CABundle)
			}
		}
	}
	return out, nil
}
