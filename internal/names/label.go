package names

// IsDNSLabel reports whether s is an RFC 1123 DNS label, as Kubernetes checks namespaces and
// label values (a hand-written check rather than a regexp: compiling one at init costs every
// memif-cni run about 0.5 ms): 1-63 characters of [a-z0-9-], starting and ending alphanumeric. It is the one
// check of the names that become directory or interface names on a node: port names (further
// bounded by MaxPortNameLen), link names, namespaces, slot IDs.
func IsDNSLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
