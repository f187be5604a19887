package explain

import (
	"strings"
)

// CNIError is a memif-cni refusal as the kubelet reports it: a FailedCreatePodSandBox Event
// whose message ends in the plugin's error. The runtime keeps the CNI error's message and
// details ("memif-cni: <msg>; <details>") but drops its code, so the code is recovered from the
// message, which memif-cni keeps fixed per code (TestCNIMessagesMatchPlugin holds this table to
// memif-cni's sources).
type CNIError struct {
	Code    uint   `json:"code"`
	Msg     string `json:"msg"`
	Details string `json:"details,omitempty"`
	Hint    string `json:"hint,omitempty"`
}

// cniCodes maps memif-cni's error messages to their codes (docs/cni.md, "Errors").
var cniCodes = map[string]uint{
	"invalid network config":            7,
	"invalid CNI_ARGS":                  4,
	"missing pod identity":              4,
	"invalid pod namespace":             4,
	"state":                             5,
	"invalid slot ID":                   5,
	"undo earlier ADD":                  5,
	"slot directory missing":            5,
	"GC":                                5,
	"DEL failed":                        5,
	"IPAM plugin not found":             7,
	"cannot read the pod's annotations": 11,
	"cannot ask the kubelet for the pod's slots": 11,
	"not ready":                     50,
	"not enough memif socket slots": 101,
	"link conflict":                 102,
	"refused a planted file":        103,
	"ADD failed":                    999,
	"CHECK failed":                  999,
}

// cniHints is what to do, per code (docs/cni.md).
var cniHints = map[uint]string{
	4:   "the runtime passed no Kubernetes pod identity: memif ports need a pod created by the kubelet",
	5:   "node-side failure: is memif-deviceplugin running on the node with the same stateDir? (its logs say more)",
	7:   "fix the pod's memifnet.io/ports annotation (or the CNI config): the message names the field",
	11:  "memif-cni could not reach the kubelet or API server; the runtime retries the sandbox",
	50:  "memif-deviceplugin or the kubelet is not ready on the node",
	101: "raise resources.limits[\"memifnet.io/socket\"] to the number of ports (or drop the limit and let the webhook set it)",
	102: "the link already joins two pods, or the two ends disagree on role, id or mode: fix one annotation or wait until the old pod is gone (the runtime retries)",
	103: "the pod left something in its slot where memif-cni writes; delete the pod (its next slot is fresh)",
	999: "an internal error; the details and memif-cni's stderr in the runtime's log say more",
}

// ParseCNIError finds memif-cni's error in a FailedCreatePodSandBox Event message, e.g.
// `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for
// sandbox "…": plugin type="memif-cni" name="k8s-pod-network" failed (add): memif-cni: link
// conflict; pod ns/p port 0 (east): …`.
func ParseCNIError(event string) (CNIError, bool) {
	const prefix = "memif-cni: "
	i := strings.Index(event, prefix)
	if i < 0 {
		return CNIError{}, false
	}
	rest := event[i+len(prefix):]
	msg, details, _ := strings.Cut(rest, "; ")
	code, ok := cniCodes[msg]
	if !ok {
		// An older or newer memif-cni: keep the text, say the code is unknown.
		return CNIError{Msg: msg, Details: details}, true
	}
	return CNIError{Code: code, Msg: msg, Details: details, Hint: cniHints[code]}, true
}
