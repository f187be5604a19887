package peerconf

import (
	"fmt"
	"strconv"
	"strings"
)

// envVar is one KEY=value line of port.env.
type envVar struct{ key, value string }

// envVars are port.env's variables, in the file's order. Every key is always there (empty when
// it does not apply), so a script under set -u can read any of them. The names follow Contiv's
// MEMIF_SOCKET and MEMIF_SECRET; the sizes are libmemif's (memif_conn_args_t: log2_ring_size,
// buffer_size) in both spellings.
func envVars(s Side, f Files) []envVar {
	p := s.Spec
	v := []envVar{
		{"MEMIF_NAME", p.Name},
		{"MEMIF_SOCKET", p.Socket},
		{"MEMIF_ID", strconv.FormatUint(uint64(p.ID), 10)},
		{"MEMIF_ROLE", p.Role},
		{"MEMIF_MODE", p.Mode},
		{"MEMIF_SECRET", p.Secret},
		{"MEMIF_QUEUES", strconv.Itoa(p.Queues)},
		{"MEMIF_RING_SIZE", strconv.Itoa(p.RingSize)},
		{"MEMIF_LOG2_RING_SIZE", strconv.Itoa(log2(p.RingSize))},
		{"MEMIF_BUFFER_SIZE", strconv.Itoa(p.BufferSize)},
		{"MEMIF_ZERO_COPY", strconv.FormatBool(p.ZeroCopy)},
		{"MEMIF_MAC", p.MAC},
		{"MEMIF_IPS", strings.Join(p.IPs, ",")},
	}
	if s.Pod == "" {
		v = append(v, envVar{"MEMIF_LINK", p.Link}, envVar{"MEMIF_PEER", p.Peer})
	} else {
		v = append(v, envVar{"MEMIF_POD", s.Pod}, envVar{"MEMIF_PEER_IPS", strings.Join(s.PeerIPs, ",")})
	}
	dev, sock, ifc := "", "", ""
	if f.DPDKArgs != "" {
		dev = DPDKDevice(s.Slot)
	}
	if f.VPPCLI != "" {
		sock, ifc = strconv.FormatUint(uint64(Number(s.Slot)), 10), VPPInterface(s.Slot, p.ID)
	}
	return append(v, envVar{"MEMIF_DPDK_DEVICE", dev}, envVar{"MEMIF_VPP_SOCKET_ID", sock}, envVar{"MEMIF_VPP_INTERFACE", ifc})
}

// envFile renders port.env: a header, the notes (why a peer got no file) as comments, then one
// KEY=value line per variable.
func envFile(s Side, f Files, notes []string) (string, error) {
	var b strings.Builder
	side := "the pod's side"
	if s.Pod != "" {
		side = "the host's side, for pod " + s.Pod
	}
	// The header names only validated, plain values (a port name and, on the host side, a
	// pod's namespace/name); a control character there is refused below anyway.
	fmt.Fprintf(&b, "# memif port %s (%s), written by memifnet: sh: set -a; . this file; set +a\n", s.Spec.Name, side)
	for _, n := range notes {
		b.WriteString("# " + n + "\n")
	}
	for _, v := range envVars(s, f) {
		q, err := shellQuote(v.value)
		if err != nil {
			return "", fmt.Errorf("%s: %w", v.key, err)
		}
		b.WriteString(v.key + "=" + q + "\n")
	}
	out := b.String()
	if hasControl(strings.ReplaceAll(out, "\n", "")) {
		return "", fmt.Errorf("port.env: a control character in a comment (port %q, pod %q)", s.Spec.Name, s.Pod)
	}
	return out, nil
}

// shellQuote writes a value so that sh's "." reads it back unchanged: bare when every byte is
// plain (letters, digits and ._/:@+,=%-), else in single quotes, each quote in it written as
// quote, backslash, quote, quote (close, an escaped quote, reopen).
// Control characters (a newline would end the line for every KEY=value reader) are refused.
func shellQuote(v string) (string, error) {
	if hasControl(v) {
		return "", fmt.Errorf("value %q has a control character", v)
	}
	plain := true
	for _, c := range []byte(v) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._/:@+,=%-", c) >= 0) {
			plain = false
			break
		}
	}
	if plain {
		return v, nil
	}
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'", nil
}

func hasControl(s string) bool {
	for _, c := range []byte(s) {
		if c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}
