package admission

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/memifnet/memifnet/cmd/memif-webhook/internal/podpolicy"
	"github.com/memifnet/memifnet/internal/names"
)

func server(t *testing.T, objs ...runtime.Object) *httptest.Server {
	t.Helper()
	h := &Handler{Peers: APIPeers(fake.NewClientset(objs...)),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	mux := http.NewServeMux()
	h.Register(mux)
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func review(t *testing.T, s *httptest.Server, path string, op admissionv1.Operation, pod, old *corev1.Pod) *admissionv1.AdmissionResponse {
	t.Helper()
	return reviewSub(t, s, path, op, "", pod, old)
}

// reviewSub is review of a request on a subresource of the pod ("" for the pod itself).
func reviewSub(t *testing.T, s *httptest.Server, path string, op admissionv1.Operation, sub string, pod, old *corev1.Pod) *admissionv1.AdmissionResponse {
	t.Helper()
	raw, _ := json.Marshal(pod)
	req := &admissionv1.AdmissionRequest{
		UID: "uid-1", Operation: op, Namespace: pod.Namespace, Name: pod.Name,
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, SubResource: sub,
		Object: runtime.RawExtension{Raw: raw},
	}
	if old != nil {
		req.OldObject.Raw, _ = json.Marshal(old)
	}
	body, _ := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req})
	resp, err := http.Post(s.URL+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%s: %d %v", path, resp.StatusCode, err)
	}
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Response.UID != "uid-1" {
		t.Fatalf("response %+v", out)
	}
	return out.Response
}

func annotated(name, ports string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels,
			Annotations: map[string]string{names.PortsAnnotation: ports}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	}
}

func placed(name, node string, phase corev1.PodPhase, links ...string) *corev1.Pod {
	p := annotated(name, "x", map[string]string{})
	for _, l := range links {
		p.Labels[podpolicy.LinkLabel(l)] = "x"
	}
	p.Spec.NodeName, p.Status.Phase = node, phase
	return p
}

func TestMutateEndpoint(t *testing.T) {
	s := server(t)
	resp := review(t, s, MutatePath, admissionv1.Create, annotated("p", "east@l1", nil), nil)
	if !resp.Allowed || resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("%+v", resp)
	}
	var ops []podpolicy.Op
	if err := json.Unmarshal(resp.Patch, &ops); err != nil || len(ops) != 3 {
		t.Fatalf("patch %s: %v", resp.Patch, err)
	}
	resp = review(t, s, MutatePath, admissionv1.Create, annotated("p", `[{"name":"e","link":"l1","mode":"tap"}]`, nil), nil)
	if resp.Allowed || resp.Result.Code != 403 || !strings.Contains(resp.Result.Message, `memifnet: metadata.annotations[memifnet.io/ports]: port 0 (e): field "mode"`) {
		t.Fatalf("%+v", resp.Result)
	}
	// Updates and other resources pass the mutating endpoint untouched.
	if resp := review(t, s, MutatePath, admissionv1.Update, annotated("p", "east@l1", nil), annotated("p", "east@l1", nil)); !resp.Allowed || resp.Patch != nil {
		t.Fatalf("%+v", resp)
	}
}

// Two links whose pods run on two nodes: refused with both named; pods that ended do not count.
func TestMutateLinksOnTwoNodes(t *testing.T) {
	otherNS := placed("other-ns", "n4", corev1.PodRunning, "l1")
	otherNS.Namespace = "other"
	s := server(t,
		placed("a", "n1", corev1.PodRunning, "l1"),
		placed("b", "n2", corev1.PodPending, "l2"),
		placed("old", "n3", corev1.PodSucceeded, "l1"),
		otherNS)
	resp := review(t, s, MutatePath, admissionv1.Create, annotated("p", "x@l1,y@l2", nil), nil)
	if resp.Allowed || !strings.Contains(resp.Result.Message, "link l1's pod ns/a runs on node n1 and link l2's pod ns/b on node n2") {
		t.Fatalf("%+v", resp.Result)
	}
	s = server(t, placed("a", "n1", corev1.PodRunning, "l1"), placed("old", "n3", corev1.PodFailed, "l2"))
	if resp := review(t, s, MutatePath, admissionv1.Create, annotated("p", "x@l1,y@l2", nil), nil); !resp.Allowed {
		t.Fatalf("%+v", resp.Result)
	}
}

// A drain evicted both pods of a one-link pair: the replacement of one is refused while the
// other (or its own predecessor) is terminating on the node, admitted once a live pod of the
// link runs or none is left.
func TestMutateLinkLeaving(t *testing.T) {
	gone := metav1.Now()
	leaving := placed("old-b", "n2", corev1.PodRunning, "l1")
	leaving.DeletionTimestamp, leaving.Finalizers = &gone, []string{"test/keep"} // the fake clientset keeps it
	s := server(t, leaving)
	resp := review(t, s, MutatePath, admissionv1.Create, annotated("new-a", "x@l1", nil), nil)
	if resp.Allowed || !strings.Contains(resp.Result.Message, "link l1's pod ns/old-b is terminating on node n2 and no other pod of the link runs") {
		t.Fatalf("%+v", resp.Result)
	}
	s = server(t, leaving, placed("b", "n2", corev1.PodRunning, "l1"))
	if resp := review(t, s, MutatePath, admissionv1.Create, annotated("new-a", "x@l1", nil), nil); !resp.Allowed {
		t.Fatalf("%+v", resp.Result)
	}
}

func TestValidateEndpoint(t *testing.T) {
	s := server(t)
	forged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "f", Namespace: "ns", Labels: map[string]string{"link.memifnet.io/l1": "x"}}}
	resp := review(t, s, ValidatePath, admissionv1.Create, forged, nil)
	if resp.Allowed || !strings.Contains(resp.Result.Message, "metadata.labels[link.memifnet.io/l1]") {
		t.Fatalf("%+v", resp.Result)
	}
	old := annotated("p", "east@l1", nil)
	changed := annotated("p", "east@l2", nil)
	resp = review(t, s, ValidatePath, admissionv1.Update, changed, old)
	if resp.Allowed || !strings.Contains(resp.Result.Message, "cannot change") {
		t.Fatalf("%+v", resp.Result)
	}
	ok := annotated("p", "east@l1", map[string]string{"link.memifnet.io/l1": "east"})
	ok.Spec.Containers[0].Resources.Limits = corev1.ResourceList{names.SocketResource: resource.MustParse("1")}
	if resp := review(t, s, ValidatePath, admissionv1.Create, ok, nil); !resp.Allowed {
		t.Fatalf("%+v", resp.Result)
	}
}

func TestBadRequests(t *testing.T) {
	s := server(t)
	for _, body := range []string{"", "{}", "not json"} {
		resp, err := http.Post(s.URL+MutatePath, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%q: %d", body, resp.StatusCode)
		}
	}
	if resp, err := http.Get(s.URL + MutatePath); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %v %v", resp, err)
	}
}

// pods/status can change labels and annotations (issue 18 part 6): an update through it is held
// to the same rule as one of the pod; one that leaves them alone (the kubelet's) passes.
func TestValidateStatusUpdates(t *testing.T) {
	s := server(t)
	old := annotated("p", "east@l1", map[string]string{"link.memifnet.io/l1": "east"})
	changed := annotated("p", "east@l2", map[string]string{"link.memifnet.io/l1": "east"})
	resp := reviewSub(t, s, ValidatePath, admissionv1.Update, "status", changed, old)
	if resp.Allowed || !strings.Contains(resp.Result.Message, "metadata.annotations[memifnet.io/ports]: cannot change") {
		t.Fatalf("annotation changed through pods/status: %+v", resp.Result)
	}
	labelled := old.DeepCopy()
	labelled.Labels["link.memifnet.io/other"] = "east"
	resp = reviewSub(t, s, ValidatePath, admissionv1.Update, "status", labelled, old)
	if resp.Allowed || !strings.Contains(resp.Result.Message, "metadata.labels[link.memifnet.io/other]") {
		t.Fatalf("link label added through pods/status: %+v", resp.Result)
	}
	kubelet := old.DeepCopy()
	kubelet.Status.Phase = corev1.PodRunning
	if resp := reviewSub(t, s, ValidatePath, admissionv1.Update, "status", kubelet, old); !resp.Allowed {
		t.Fatalf("a status-only update: %+v", resp.Result)
	}
	// Other subresources (eviction, ...) are not the webhook's; pods/binding is
	// (TestValidateBindings).
	if resp := reviewSub(t, s, ValidatePath, admissionv1.Create, "eviction", changed, nil); !resp.Allowed {
		t.Fatalf("eviction: %+v", resp.Result)
	}
}

// reviewBinding sends a CREATE of a Binding of pod ns/p carrying the annotations and labels,
// through pods/binding, or through bindings if legacy.
func reviewBinding(t *testing.T, s *httptest.Server, legacy bool, annotations, labels map[string]string) *admissionv1.AdmissionResponse {
	t.Helper()
	b := &corev1.Binding{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Binding"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Annotations: annotations, Labels: labels},
		Target:     corev1.ObjectReference{Kind: "Node", Name: "n1"}}
	raw, _ := json.Marshal(b)
	req := &admissionv1.AdmissionRequest{
		UID: "uid-1", Operation: admissionv1.Create, Namespace: "ns", Name: "p",
		Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Binding"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, SubResource: "binding",
		Object: runtime.RawExtension{Raw: raw},
	}
	if legacy {
		req.Resource.Resource, req.SubResource = "bindings", ""
	}
	body, _ := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req})
	resp, err := http.Post(s.URL+ValidatePath, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || out.Response == nil || out.Response.UID != "uid-1" {
		t.Fatalf("binding review: %d %v %+v", resp.StatusCode, err, out.Response)
	}
	return out.Response
}

// A Binding's annotations are copied into the pod by the API server (and its labels with
// PodTopologyLabelsAdmission), past any pod UPDATE (security row 38): one that carries the
// annotation, another memifnet.io/ annotation or a link label is refused naming it; the
// scheduler's (none of them, or other annotations) passes. The same through the older bindings
// resource.
func TestValidateBindings(t *testing.T) {
	s := server(t)
	for _, legacy := range []bool{false, true} {
		testValidateBindings(t, s, legacy)
	}
}

func testValidateBindings(t *testing.T, s *httptest.Server, legacy bool) {
	for _, c := range []struct {
		ann, lab map[string]string
		want     string
	}{
		{map[string]string{names.PortsAnnotation: "east@victim-link"}, nil, "metadata.annotations[memifnet.io/ports]: a Binding (pods/binding) cannot set"},
		{map[string]string{names.PortsAnnotation: ""}, nil, "metadata.annotations[memifnet.io/ports]"},
		{map[string]string{"memifnet.io/other": "x", "a": "b"}, nil, "metadata.annotations[memifnet.io/other]"},
		{nil, map[string]string{"link.memifnet.io/victim-link": "east"}, "metadata.labels[link.memifnet.io/victim-link]: a Binding (pods/binding) cannot set"},
	} {
		resp := reviewBinding(t, s, legacy, c.ann, c.lab)
		if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusForbidden || !strings.Contains(resp.Result.Message, "memifnet: "+c.want) {
			t.Errorf("binding (legacy %v) with annotations %v labels %v: %+v, want a refusal naming %q", legacy, c.ann, c.lab, resp.Result, c.want)
		}
	}
	for _, ok := range []map[string]string{nil, {"scheduler.example.com/why": "fit", "x.memifnet.io.example/y": "z"}} {
		if resp := reviewBinding(t, s, legacy, ok, map[string]string{"topology.kubernetes.io/zone": "a"}); !resp.Allowed {
			t.Errorf("binding (legacy %v) with annotations %v: %+v", legacy, ok, resp.Result)
		}
	}
}

// A pod of another namespace that selects a link label across namespaces (issue 18 part 8) is
// refused at creation, naming the field.
func TestValidateRefusesCrossNamespaceLinkAffinity(t *testing.T) {
	s := server(t)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "blocker", Namespace: "other"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}, Affinity: &corev1.Affinity{
			PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"link.memifnet.io/l1": "west"}},
				Namespaces:    []string{"ns"}, TopologyKey: "kubernetes.io/hostname"}}}}}}
	resp := review(t, s, ValidatePath, admissionv1.Create, p, nil)
	if resp.Allowed || !strings.Contains(resp.Result.Message, "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaces") {
		t.Fatalf("%+v", resp.Result)
	}
}
