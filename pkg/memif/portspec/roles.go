package portspec

// The role rules of a port, written once for memif-cni, the DRA driver and kubectl-memifnet
// (docs/design.md, "Port object"): a host port's pod is the client, the other end of a link
// takes the opposite role of the end that has one, and with neither set the end that attaches
// (or is listed) first serves.
const (
	// HostPodRole is the pod's end of a host port, always: the node's data plane serves. A node
	// side chosen by the pod would connect to a path the pod controls, or hand the node's
	// buffer memory to the pod as a zero-copy client (docs/security.md).
	HostPodRole = RoleClient
	// FirstRole is the role of a link's first end when it asks for none.
	FirstRole = RoleServer
)

// Opposite is the role of the other end of a link whose one end has role: "" when role is
// unset or not a role, so that an unknown stays unknown.
func Opposite(role string) string {
	switch role {
	case RoleServer:
		return RoleClient
	case RoleClient:
		return RoleServer
	}
	return ""
}

// PairRoles fills in the roles of a link's two ends, a being the first: roles that are set stay;
// an unset one is the opposite of the other; with neither set, a takes FirstRole. ok is false
// when both are set to the same role (one end of a link serves, the other is the client).
func PairRoles(a, b string) (ra, rb string, ok bool) {
	switch {
	case a != "" && a == b:
		return a, b, false
	case a != "" && b != "":
		return a, b, true
	case a != "":
		return a, Opposite(a), true
	case b != "":
		return Opposite(b), b, true
	}
	return FirstRole, Opposite(FirstRole), true
}
