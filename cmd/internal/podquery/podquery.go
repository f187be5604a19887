// Package podquery is the protocol between memif-cni and its helper memif-cni-podinfo, which
// asks the kubelet's Pods API or the API server for a pod's annotations when the runtime did not
// pass them. The lookups need net/http and crypto/tls, whose start-up cost (about 2 ms on every
// plugin run, measured with BenchmarkAddDel) memif-cni only pays when it needs them, by running
// the helper. memif-cni writes a Query as JSON on the helper's stdin; the helper answers with an
// Answer on stdout and exits 0, or exits non-zero with a message on stderr if it could not work
// at all.
package podquery

// Query names the pod and the places to ask.
type Query struct {
	Namespace      string `json:"namespace"`
	Name           string `json:"name"`
	UID            string `json:"uid,omitempty"`
	KubeletURL     string `json:"kubeletURL,omitempty"` // "" to skip
	Kubeconfig     string `json:"kubeconfig,omitempty"` // "" to skip
	TimeoutSeconds int    `json:"timeoutSeconds"`
}

// Where the helper found the annotations (Answer.Source).
const (
	SourceKubelet   = "kubelet"
	SourceAPIServer = "apiserver"
)

// Answer has the annotations and where they came from, or, if no place knew the pod, what each
// place said.
type Answer struct {
	Found       bool              `json:"found"`
	Source      string            `json:"source,omitempty"` // SourceKubelet or SourceAPIServer
	Annotations map[string]string `json:"annotations,omitempty"`
	Tried       []string          `json:"tried,omitempty"`
}
