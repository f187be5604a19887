// Package cnierr is memif-cni's error catalogue: each error it returns is one Kind, a code and a
// fixed message, and each code has a hint saying what to do. It is a contract between binaries:
// memif-cni builds its errors from it, and kubectl-memifnet reads them back from the pod's
// FailedCreatePodSandBox Events, where the runtime keeps the message ("memif-cni: <msg>;
// <details>") but drops the code. So a message is never reused for another code, and details go
// after it. docs/cni.md ("Errors and what to do") is the reader's copy.
package cnierr

// Prefix starts every message memif-cni returns, so that the runtime's text names the plugin.
const Prefix = "memif-cni: "

// The codes: 1-99 are the CNI specification's (the same numbers as libcni's types.Err*, which a
// test holds them to); 100 and up are memif-cni's own.
const (
	CodeInvalidEnv    uint = 4   // types.ErrInvalidEnvironmentVariables
	CodeIO            uint = 5   // types.ErrIOFailure
	CodeInvalidConfig uint = 7   // types.ErrInvalidNetworkConfig
	CodeTryAgainLater uint = 11  // types.ErrTryAgainLater
	CodeNotAvailable  uint = 50  // the specification's "plugin not available", for STATUS
	CodeInternal      uint = 999 // types.ErrInternal
	CodeNoSlots       uint = 101 // the pod holds fewer memifnet.io/socket slots than it asks ports
	CodeLinkConflict  uint = 102 // the link is full, or the other end disagrees on role, id or mode
	CodeRefused       uint = 103 // something in the pod's slot that memif-cni did not put there
)

// Kind is one error of memif-cni: its code and its fixed message.
type Kind struct {
	Code uint
	Msg  string
}

// All is every Kind, in the order declared below: kind adds each one.
var All []Kind

func kind(code uint, msg string) Kind {
	k := Kind{code, msg}
	All = append(All, k)
	return k
}

// Every error memif-cni returns.
var (
	InvalidConfig    = kind(CodeInvalidConfig, "invalid network config")
	InvalidArgs      = kind(CodeInvalidEnv, "invalid CNI_ARGS")
	MissingPod       = kind(CodeInvalidEnv, "missing pod identity")
	InvalidNamespace = kind(CodeInvalidEnv, "invalid pod namespace")
	State            = kind(CodeIO, "state")
	InvalidSlotID    = kind(CodeIO, "invalid slot ID")
	UndoEarlierAdd   = kind(CodeIO, "undo earlier ADD")
	SlotDirMissing   = kind(CodeIO, "slot directory missing")
	MountsStayHere   = kind(CodeIO, "link mounts would not reach the pod")
	GC               = kind(CodeIO, "GC")
	DelFailed        = kind(CodeIO, "DEL failed")
	IPAMNotFound     = kind(CodeInvalidConfig, "IPAM plugin not found")
	NoAnnotations    = kind(CodeTryAgainLater, "cannot read the pod's annotations")
	NoSlotLookup     = kind(CodeTryAgainLater, "cannot ask the kubelet for the pod's slots")
	NotReady         = kind(CodeNotAvailable, "not ready")
	NoSlots          = kind(CodeNoSlots, "not enough memif socket slots")
	LinkConflict     = kind(CodeLinkConflict, "link conflict")
	Refused          = kind(CodeRefused, "refused a planted file")
	AddFailed        = kind(CodeInternal, "ADD failed")
	CheckFailed      = kind(CodeInternal, "CHECK failed")
)

// ByMsg finds the Kind of a message (without Prefix and details).
func ByMsg(msg string) (Kind, bool) {
	for _, k := range All {
		if k.Msg == msg {
			return k, true
		}
	}
	return Kind{}, false
}

// Hint says what to do about an error of code; "" for a code memif-cni does not use.
func Hint(code uint) string { return hints[code] }

var hints = map[uint]string{
	CodeInvalidEnv:    "the runtime passed no Kubernetes pod identity: memif ports need a pod created by the kubelet",
	CodeIO:            "node-side failure: is memif-deviceplugin running on the node with the same stateDir? (its logs say more)",
	CodeInvalidConfig: "fix the pod's memifnet.io/ports annotation (or the CNI config): the message names the field",
	CodeTryAgainLater: "memif-cni could not reach the kubelet or API server; the runtime retries the sandbox",
	CodeNotAvailable:  "memif-deviceplugin or the kubelet is not ready on the node",
	CodeNoSlots:       "raise resources.limits[\"memifnet.io/socket\"] to the number of ports (or drop the limit and let the webhook set it)",
	CodeLinkConflict:  "the link already joins two pods, or the two ends disagree on role, id or mode: fix one annotation or wait until the old pod is gone (the runtime retries)",
	CodeRefused:       "the pod left something in its slot where memif-cni writes; delete the pod (its next slot is fresh)",
	CodeInternal:      "an internal error; the details and memif-cni's stderr in the runtime's log say more",
}
