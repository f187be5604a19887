// Package admission serves the admission.k8s.io/v1 AdmissionReview endpoints of the webhook: the
// mutating one turns a pod's memifnet.io/ports annotation into a socket limit, labels and affinity
// (podpolicy.Mutate), the validating one checks the pod as it will be stored (podpolicy.Validate,
// ValidateUpdate; updates through pods/status too; pods/binding requests that carry memifnet's
// metadata, which the API server copies into the pod, podpolicy.ValidateBinding). A refusal goes back to the pod's author (kubectl prints it) naming the field.
package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/memifnet/memifnet/cmd/memif-webhook/internal/podpolicy"
)

// Paths the webhook configurations call.
const (
	MutatePath   = "/mutate"
	ValidatePath = "/validate"
)

// maxBody bounds a review: the API server sends at most a few MiB (an object is under 1.5 MiB,
// with its old version twice that).
const maxBody = 8 << 20

// PeerFunc returns the existing pods of the links in namespace ns (any node, or none yet).
type PeerFunc func(ctx context.Context, ns string, links []string) ([]podpolicy.Peer, error)

// Handler serves both endpoints.
type Handler struct {
	// Peers is asked for every pod with a link: its peers on two nodes refuse a pod of two links,
	// and a link whose only placed pods are terminating refuses any (podpolicy.Mutate).
	Peers PeerFunc
	Log   *slog.Logger
}

// Register adds the endpoints to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST "+MutatePath, func(w http.ResponseWriter, r *http.Request) { h.serve(w, r, h.mutate) })
	mux.HandleFunc("POST "+ValidatePath, func(w http.ResponseWriter, r *http.Request) { h.serve(w, r, h.validate) })
}

type reviewFunc func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, review reviewFunc) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		http.Error(w, "request body unreadable or too large", http.StatusRequestEntityTooLarge)
		return
	}
	var in admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &in); err != nil || in.Request == nil {
		http.Error(w, fmt.Sprintf("not an admission.k8s.io/v1 AdmissionReview: %v", err), http.StatusBadRequest)
		return
	}
	resp := review(r.Context(), in.Request)
	resp.UID = in.Request.UID
	out := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Response: resp,
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(&out); err != nil {
		h.Log.Warn("writing admission response", "err", err)
	}
}

func decodePod(raw []byte) (*corev1.Pod, error) {
	var p corev1.Pod
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("decoding the pod: %w", err)
	}
	return &p, nil
}

// allow and deny build responses; a refusal is a 403 with the reason for the author, anything
// else (the webhook's own trouble) a 500 saying so.
func allow() *admissionv1.AdmissionResponse { return &admissionv1.AdmissionResponse{Allowed: true} }

func (h *Handler) deny(req *admissionv1.AdmissionRequest, err error) *admissionv1.AdmissionResponse {
	name := req.Name
	if name == "" {
		name = "(generated name)"
	}
	var r *podpolicy.Refusal
	if errors.As(err, &r) {
		h.Log.Info("refused", "op", req.Operation, "pod", req.Namespace+"/"+name, "reason", err.Error())
		return &admissionv1.AdmissionResponse{Result: &metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
			Message: "memifnet: " + err.Error(),
		}}
	}
	h.Log.Error("admission failed", "op", req.Operation, "pod", req.Namespace+"/"+name, "err", err)
	return &admissionv1.AdmissionResponse{Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError,
		Message: "memifnet webhook: " + err.Error(),
	}}
}

func isPods(req *admissionv1.AdmissionRequest) bool {
	return req.Resource.Group == "" && req.Resource.Resource == "pods" && req.SubResource == ""
}

// isPodStatus is an update through pods/status, which may change labels and annotations too
// (the API server keeps only the spec and owner references of the stored pod).
func isPodStatus(req *admissionv1.AdmissionRequest) bool {
	return req.Resource.Group == "" && req.Resource.Resource == "pods" && req.SubResource == "status"
}

// isPodBinding is a Binding, through pods/binding or the older bindings resource: the API server
// copies its annotations (and, with PodTopologyLabelsAdmission, its labels) into the pod it binds.
func isPodBinding(req *admissionv1.AdmissionRequest) bool {
	return req.Resource.Group == "" && (req.Resource.Resource == "pods" && req.SubResource == "binding" ||
		req.Resource.Resource == "bindings" && req.SubResource == "")
}

func (h *Handler) mutate(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if !isPods(req) || req.Operation != admissionv1.Create {
		return allow()
	}
	pod, err := decodePod(req.Object.Raw)
	if err != nil {
		return h.deny(req, err)
	}
	var peers []podpolicy.Peer
	if ps, ok, err := podpolicy.Ports(pod); err != nil {
		return h.deny(req, err)
	} else if links := podpolicy.Links(ps); ok && len(links) > 0 {
		if peers, err = h.Peers(ctx, req.Namespace, links); err != nil {
			return h.deny(req, fmt.Errorf("looking up the pods of links %v: %w", links, err))
		}
	}
	ops, err := podpolicy.Mutate(pod, peers)
	if err != nil {
		return h.deny(req, err)
	}
	resp := allow()
	if len(ops) > 0 {
		patch, err := json.Marshal(ops)
		if err != nil {
			return h.deny(req, err)
		}
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = patch, &pt
		h.Log.Info("mutated", "pod", req.Namespace+"/"+pod.Name+pod.GenerateName, "patch", string(patch))
	}
	return resp
}

func (h *Handler) validate(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if isPodBinding(req) {
		return h.validateBinding(req)
	}
	status := isPodStatus(req)
	if !isPods(req) && !status {
		return allow()
	}
	pod, err := decodePod(req.Object.Raw)
	if err != nil {
		return h.deny(req, err)
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	switch {
	case req.Operation == admissionv1.Create && !status:
		err = podpolicy.Validate(pod)
	case req.Operation == admissionv1.Update:
		var old *corev1.Pod
		if old, err = decodePod(req.OldObject.Raw); err == nil {
			err = podpolicy.ValidateUpdate(old, pod)
		}
	}
	if err != nil {
		return h.deny(req, err)
	}
	return allow()
}

func (h *Handler) validateBinding(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation != admissionv1.Create {
		return allow()
	}
	var b corev1.Binding
	if err := json.Unmarshal(req.Object.Raw, &b); err != nil {
		return h.deny(req, fmt.Errorf("decoding the binding: %w", err))
	}
	if err := podpolicy.ValidateBinding(b.Annotations, b.Labels); err != nil {
		return h.deny(req, err)
	}
	return allow()
}
