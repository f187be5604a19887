package manifests

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// cert-manager's kinds, mirrored with the fields the component sets (its Go module is far too
// heavy for a test); decoded strictly like the rest, so a misspelt field fails.
type cmRef struct {
	Group string `json:"group"`
	Kind  string `json:"kind"`
	Name  string `json:"name"`
}

type cmIssuer struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   metaOnly `json:"metadata"`
	Spec       struct {
		SelfSigned *struct{} `json:"selfSigned,omitempty"`
		CA         *struct {
			SecretName string `json:"secretName"`
		} `json:"ca,omitempty"`
	} `json:"spec"`
}

type cmCertificate struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   metaOnly `json:"metadata"`
	Spec       struct {
		IsCA           bool   `json:"isCA,omitempty"`
		CommonName     string `json:"commonName,omitempty"`
		SecretName     string `json:"secretName"`
		SecretTemplate *struct {
			Labels map[string]string `json:"labels,omitempty"`
		} `json:"secretTemplate,omitempty"`
		DNSNames    []string `json:"dnsNames,omitempty"`
		Duration    string   `json:"duration"`
		RenewBefore string   `json:"renewBefore"`
		PrivateKey  struct {
			Algorithm      string `json:"algorithm"`
			Size           int    `json:"size"`
			RotationPolicy string `json:"rotationPolicy,omitempty"`
		} `json:"privateKey"`
		Usages    []string `json:"usages,omitempty"`
		IssuerRef cmRef    `json:"issuerRef"`
	} `json:"spec"`
}

func (o *cmIssuer) GetNamespace() string      { return o.Metadata.Namespace }
func (o *cmCertificate) GetNamespace() string { return o.Metadata.Namespace }

// decodeCertManager decodes cert-manager.io/v1 Issuer and Certificate strictly; ok is false for
// any other kind.
func decodeCertManager(y []byte, kind string) (any, bool, error) {
	var obj any
	switch kind {
	case "Issuer":
		obj = &cmIssuer{}
	case "Certificate":
		obj = &cmCertificate{}
	default:
		return nil, false, nil
	}
	if err := yaml.UnmarshalStrict(y, obj); err != nil {
		return nil, true, err
	}
	if v := reflect.ValueOf(obj).Elem().FieldByName("APIVersion").String(); v != "cert-manager.io/v1" {
		return nil, true, fmt.Errorf("%s: apiVersion %q, want cert-manager.io/v1", kind, v)
	}
	return obj, true, nil
}

// The cert-manager overlay: the usual CA bootstrap (self-signed Issuer -> CA Certificate -> CA
// Issuer -> serving Certificate) for the names the webhook checks, into the Secret the webhook
// reads, injected by the cainjector into both configurations; and otherwise exactly the chained
// install, but for --certificates=external and the reduced RBAC (TestWebhook checks those).
func TestCertManager(t *testing.T) {
	objs := build(t, "overlays/cert-manager")
	issuers, certsByName := map[string]*cmIssuer{}, map[string]*cmCertificate{}
	for _, o := range objs {
		switch o := o.(type) {
		case *cmIssuer:
			issuers[o.Metadata.Name] = o
		case *cmCertificate:
			certsByName[o.Metadata.Name] = o
		}
	}
	if len(issuers) != 2 || len(certsByName) != 2 {
		t.Fatalf("%d Issuers, %d Certificates: want the self-signed and the CA Issuer, the CA and the serving Certificate", len(issuers), len(certsByName))
	}
	for _, o := range append(slices.Collect(maps.Values(issuers)), nil) {
		if o != nil && (o.Metadata.Namespace != namespace || o.Metadata.Labels["app.kubernetes.io/part-of"] != "memifnet") {
			t.Errorf("Issuer %s: namespace %q labels %v", o.Metadata.Name, o.Metadata.Namespace, o.Metadata.Labels)
		}
	}
	issuerOf := func(c *cmCertificate) *cmIssuer {
		t.Helper()
		r := c.Spec.IssuerRef
		i := issuers[r.Name]
		if r.Kind != "Issuer" || r.Group != "cert-manager.io" || i == nil {
			t.Fatalf("Certificate %s: issuerRef %+v is not an Issuer of the overlay", c.Metadata.Name, r)
		}
		return i
	}
	duration := func(c *cmCertificate) time.Duration {
		t.Helper()
		d, err1 := time.ParseDuration(c.Spec.Duration)
		r, err2 := time.ParseDuration(c.Spec.RenewBefore)
		if err1 != nil || err2 != nil || r <= 0 || r >= d/2 {
			t.Errorf("Certificate %s: duration %q renewBefore %q", c.Metadata.Name, c.Spec.Duration, c.Spec.RenewBefore)
		}
		return d
	}

	serving := certsByName[webhookName]
	if serving == nil || serving.Metadata.Namespace != namespace {
		t.Fatalf("no Certificate %s/%s (the inject-ca-from annotation names it)", namespace, webhookName)
	}
	dep := find(t, objs, webhookName, func(d *appsv1.Deployment) string { return d.Name })
	secret, _ := flagValue(container(t, dep.Spec.Template.Spec.Containers, "webhook").Args, "secret")
	svc := webhookName + "." + namespace
	s := serving.Spec
	if s.SecretName != webhookSecret || secret != webhookSecret || s.IsCA ||
		!slices.Equal(s.DNSNames, []string{webhookName, svc, svc + ".svc", svc + ".svc.cluster.local"}) ||
		!slices.Contains(s.Usages, "server auth") || s.PrivateKey.Algorithm != "ECDSA" || s.PrivateKey.RotationPolicy != "Always" ||
		s.SecretTemplate == nil || s.SecretTemplate.Labels["app.kubernetes.io/part-of"] != "memifnet" {
		t.Errorf("serving Certificate %+v: want Secret %s (= --secret %s), the Service's names, server auth, a fresh ECDSA key per renewal", s, webhookSecret, secret)
	}
	caIssuer := issuerOf(serving)
	if caIssuer.Spec.CA == nil || caIssuer.Spec.SelfSigned != nil {
		t.Fatalf("Issuer %s of the serving Certificate: want a CA Issuer", caIssuer.Metadata.Name)
	}
	var ca *cmCertificate
	for _, c := range certsByName {
		if c.Spec.SecretName == caIssuer.Spec.CA.SecretName && c != serving {
			ca = c
		}
	}
	if ca == nil || !ca.Spec.IsCA || len(ca.Spec.DNSNames) != 0 || ca.Metadata.Namespace != namespace {
		t.Fatalf("CA Issuer %s: its Secret %s is not written by a CA Certificate of the overlay", caIssuer.Metadata.Name, caIssuer.Spec.CA.SecretName)
	}
	if root := issuerOf(ca); root.Spec.SelfSigned == nil || root.Spec.CA != nil {
		t.Errorf("CA Certificate %s: issued by %s, want the self-signed Issuer", ca.Metadata.Name, root.Metadata.Name)
	}
	if ca.Spec.SecretName == webhookSecret {
		t.Error("the CA's Secret must not be the one the webhook serves")
	}
	// The cainjector injects only the current CA: it must outlive many serving certificates.
	if dca, ds := duration(ca), duration(serving); dca < 10*ds {
		t.Errorf("CA duration %s, serving %s: the CA must outlive the serving certificates by far", dca, ds)
	}

	// Everything else is the chained install unchanged.
	chained := build(t, "overlays/chained")
	strip := func(objs []any) []any {
		var out []any
		for _, o := range objs {
			switch o := o.(type) {
			case *cmIssuer, *cmCertificate, *rbacv1.ClusterRole, *rbacv1.Role:
				if n := reflect.ValueOf(o).Elem().FieldByName("Name"); n.IsValid() && n.String() != webhookName {
					out = append(out, o)
				}
				continue
			case *admissionregv1.MutatingWebhookConfiguration:
				o = o.DeepCopy()
				delete(o.Annotations, certManagerInject)
				if len(o.Annotations) == 0 {
					o.Annotations = nil
				}
				out = append(out, o)
			case *admissionregv1.ValidatingWebhookConfiguration:
				o = o.DeepCopy()
				delete(o.Annotations, certManagerInject)
				if len(o.Annotations) == 0 {
					o.Annotations = nil
				}
				out = append(out, o)
			case *appsv1.Deployment:
				o = o.DeepCopy()
				for i := range o.Spec.Template.Spec.Containers {
					c := &o.Spec.Template.Spec.Containers[i]
					c.Args = slices.DeleteFunc(c.Args, func(a string) bool { return a == "--certificates=external" })
				}
				out = append(out, o)
			default:
				out = append(out, o)
			}
		}
		return out
	}
	if a, b := strip(objs), strip(chained); !reflect.DeepEqual(a, b) {
		t.Errorf("overlays/cert-manager differs from overlays/chained beyond the certificates:\n%d objects vs %d", len(a), len(b))
		for i := range min(len(a), len(b)) {
			if !reflect.DeepEqual(a[i], b[i]) {
				t.Errorf("first difference: %T", a[i])
				break
			}
		}
	}
}

// The component also goes on top of the Multus and DRA overlays (docs/install.md shows the
// kustomization).
func TestCertManagerOverOtherOverlays(t *testing.T) {
	for _, overlay := range []string{"overlays/multus", "overlays/dra"} {
		t.Run(overlay, func(t *testing.T) {
			dir := t.TempDir()
			// kustomize takes no absolute paths: relative ones from the temporary directory.
			rel := func(p string) string {
				a, err := filepath.Abs(p)
				if err == nil {
					a, err = filepath.Rel(dir, a)
				}
				if err != nil {
					t.Fatal(err)
				}
				return a
			}
			k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + rel(overlay) +
				"\ncomponents:\n  - " + rel("components/cert-manager") + "\n"
			if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
				t.Fatal(err)
			}
			objs, plain := build(t, dir), build(t, overlay)
			if len(objs) != len(plain)+4 {
				t.Errorf("%d objects, want the overlay's %d and 2 Issuers, 2 Certificates", len(objs), len(plain))
			}
			find(t, objs, webhookName, func(c *cmCertificate) string { return c.Metadata.Name })
			dep := find(t, objs, webhookName, func(d *appsv1.Deployment) string { return d.Name })
			if v, _ := flagValue(container(t, dep.Spec.Template.Spec.Containers, "webhook").Args, "certificates"); v != "external" {
				t.Errorf("--certificates=%q", v)
			}
			svc := find(t, objs, webhookName, func(s *corev1.Service) string { return s.Name })
			checkConfigurations(t, objs, svc, true)
			checkWebhookRBAC(t, objs, true)
		})
	}
}
