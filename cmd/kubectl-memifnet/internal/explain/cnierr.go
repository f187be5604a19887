package explain

import (
	"strings"

	"github.com/memifnet/memifnet/cmd/internal/cnierr"
)

// CNIError is a memif-cni refusal as the kubelet reports it: a FailedCreatePodSandBox Event
// whose message ends in the plugin's error. The runtime keeps the CNI error's message and
// details ("memif-cni: <msg>; <details>") but drops its code, so the code is recovered from the
// message through memif-cni's error catalogue (cmd/internal/cnierr), which memif-cni builds its
// errors from.
type CNIError struct {
	Code    uint   `json:"code"`
	Msg     string `json:"msg"`
	Details string `json:"details,omitempty"`
	Hint    string `json:"hint,omitempty"`
}

// ParseCNIError finds memif-cni's error in a FailedCreatePodSandBox Event message, e.g.
// `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for
// sandbox "…": plugin type="memif-cni" name="k8s-pod-network" failed (add): memif-cni: link
// conflict; pod ns/p port 0 (east): …`.
func ParseCNIError(event string) (CNIError, bool) {
	i := strings.Index(event, cnierr.Prefix)
	if i < 0 {
		return CNIError{}, false
	}
	rest := event[i+len(cnierr.Prefix):]
	msg, details, _ := strings.Cut(rest, "; ")
	k, ok := cnierr.ByMsg(msg)
	if !ok {
		// An older or newer memif-cni: keep the text, say the code is unknown.
		return CNIError{Msg: msg, Details: details}, true
	}
	return CNIError{Code: k.Code, Msg: msg, Details: details, Hint: cnierr.Hint(k.Code)}, true
}
