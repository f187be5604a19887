package peerconf

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// parseEnv is a small port.env reader of the kind any language's app would write: comments and
// KEY=value lines, a value bare or in single quotes ('\” for a quote inside). It fails the test
// on a line it cannot read and on a duplicate key.
func parseEnv(t testing.TB, env string) map[string]string {
	t.Helper()
	m, err := readEnv(env)
	if err != nil {
		t.Fatalf("%v in:\n%s", err, env)
	}
	return m
}

func readEnv(env string) (map[string]string, error) {
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(env))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !strings.HasPrefix(k, "MEMIF_") {
			return nil, fmt.Errorf("line %q is not MEMIF_KEY=value", line)
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("key %s twice", k)
		}
		val, err := unquote(v)
		if err != nil {
			return nil, err
		}
		m[k] = val
	}
	return m, sc.Err()
}

// unquote reads a value: bare, or runs of '...' and \' (as '\” writes a quote).
func unquote(v string) (string, error) {
	if !strings.HasPrefix(v, "'") {
		if strings.ContainsAny(v, " '\"\\$`") {
			return "", fmt.Errorf("bare value %q has a shell metacharacter", v)
		}
		return v, nil
	}
	var b strings.Builder
	for len(v) > 0 {
		switch {
		case strings.HasPrefix(v, `\'`):
			b.WriteByte('\'')
			v = v[2:]
		case v[0] == '\'':
			end := strings.IndexByte(v[1:], '\'')
			if end < 0 {
				return "", fmt.Errorf("unterminated quote in %q", v)
			}
			b.WriteString(v[1 : 1+end])
			v = v[2+end:]
		default:
			return "", fmt.Errorf("%q after a quoted part", v)
		}
	}
	return b.String(), nil
}

// shEnv sources env in sh (dash on Debian: the strictest common sh) and returns every MEMIF_
// variable as sh sees it, read back NUL-separated so that no value is mangled.
func shEnv(t testing.TB, env string) map[string]string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "port.env")
	if err := os.WriteFile(f, []byte(env), 0o644); err != nil {
		t.Fatal(err)
	}
	keys := []string{}
	for k := range parseEnv(t, env) {
		keys = append(keys, k)
	}
	script := `set -eu; . "$1"; shift; for k in "$@"; do eval "v=\${$k}"; printf '%s=%s\0' "$k" "$v"; done`
	out, err := exec.Command("sh", append([]string{"-c", script, "sh", f}, keys...)...).Output()
	if err != nil {
		t.Fatalf("sh . %s: %v\n%s", f, err, env)
	}
	m := map[string]string{}
	for _, kv := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// TestEnv: port.env has every variable, read the same by the small parser and by sh.
func TestEnv(t *testing.T) {
	p := linkSpec()
	p.ZeroCopy = true
	f, err := Generate(Side{Spec: p, Slot: "slot-007"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"MEMIF_NAME": "east", "MEMIF_SOCKET": p.Socket, "MEMIF_ID": "3", "MEMIF_ROLE": "client",
		"MEMIF_MODE": "ethernet", "MEMIF_SECRET": p.Secret, "MEMIF_QUEUES": "2", "MEMIF_RING_SIZE": "1024",
		"MEMIF_LOG2_RING_SIZE": "10", "MEMIF_BUFFER_SIZE": "2048", "MEMIF_ZERO_COPY": "true",
		"MEMIF_MAC": p.MAC, "MEMIF_IPS": "", "MEMIF_LINK": "chain-1", "MEMIF_PEER": "",
		"MEMIF_DPDK_DEVICE": "net_memif10007", "MEMIF_VPP_SOCKET_ID": "10007", "MEMIF_VPP_INTERFACE": "memif10007/3",
	}
	for name, got := range map[string]map[string]string{"parser": parseEnv(t, f.Env), "sh": shEnv(t, f.Env)} {
		if len(got) != len(want) {
			t.Errorf("%s: %d variables, want %d: %v", name, len(got), len(want), got)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q", name, k, got[k], v)
			}
		}
	}
}

// TestEnvOddValues: values with every kind of byte sh treats specially come back unchanged
// through sh and the parser; control characters are refused, naming the variable.
func TestEnvOddValues(t *testing.T) {
	for _, v := range []string{
		"", "plain", "/a b/memif.sock", "it's", "''", `\'`, "$HOME", "`id`", "$(id)", "a;b&c|d", "*?[x]",
		"~root", `"q"`, "#hash", "a=b,c", "-n", "tab\tnot", "ünïcode", "x'\\''y", "!history", "{a,b}",
	} {
		if strings.ContainsAny(v, "\t") {
			if _, err := shellQuote(v); err == nil {
				t.Errorf("shellQuote(%q) took a control character", v)
			}
			continue
		}
		p := linkSpec()
		p.Socket = "/run/" + v // length is within MaxSocketLen for all of these
		p.Secret = v
		if len(p.Secret) > portspec.MaxSecretLen {
			p.Secret = p.Secret[:portspec.MaxSecretLen]
		}
		f, err := Generate(Side{Spec: p, Slot: "slot-1"})
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		for name, got := range map[string]map[string]string{"parser": parseEnv(t, f.Env), "sh": shEnv(t, f.Env)} {
			if got["MEMIF_SOCKET"] != p.Socket || got["MEMIF_SECRET"] != p.Secret {
				t.Errorf("%s read MEMIF_SOCKET %q, MEMIF_SECRET %q; want %q, %q", name, got["MEMIF_SOCKET"], got["MEMIF_SECRET"], p.Socket, p.Secret)
			}
		}
	}
	p := linkSpec()
	p.Socket = "/run/a\x7fb"
	if _, err := Generate(Side{Spec: p, Slot: "slot-1"}); err == nil || !strings.Contains(err.Error(), "MEMIF_SOCKET") {
		t.Errorf("a DEL in the socket path: %v, want an error naming MEMIF_SOCKET", err)
	}
}
