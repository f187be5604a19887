package conflist

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
)

const calico = `{
  "name": "k8s-pod-network",
  "cniVersion": "0.3.1",
  "plugins": [
    {"type": "calico", "log_level": "info", "datastore_type": "kubernetes", "ipam": {"type": "calico-ipam"}, "policy": {"type": "k8s"}},
    {"type": "portmap", "snat": true, "capabilities": {"portMappings": true}},
    {"type": "bandwidth", "capabilities": {"bandwidth": true}}
  ]
}`

const plugin = `{"type":"memif-cni","capabilities":{"io.kubernetes.cri.pod-annotations":true}}`

func types(t *testing.T, data []byte) []string {
	t.Helper()
	l, err := libcni.ConfListFromBytes(data) // what runtimes parse it with
	if err != nil {
		t.Fatalf("not a valid conflist for libcni: %v\n%s", err, data)
	}
	var out []string
	for _, p := range l.Plugins {
		out = append(out, p.Network.Type)
	}
	return out
}

func plugins(t *testing.T, data []byte) []json.RawMessage {
	t.Helper()
	var c struct{ Plugins []json.RawMessage }
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	return c.Plugins
}

func compact(t *testing.T, b []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestInsertAppendsLastAndKeepsTheRest(t *testing.T) {
	out, changed, err := Insert([]byte(calico), []byte(plugin))
	if err != nil || !changed {
		t.Fatalf("Insert: changed=%v err=%v", changed, err)
	}
	if got := strings.Join(types(t, out), ","); got != "calico,portmap,bandwidth,memif-cni" {
		t.Errorf("plugin order %s", got)
	}
	before, after := plugins(t, []byte(calico)), plugins(t, out)
	for i := range before {
		if compact(t, before[i]) != compact(t, after[i]) {
			t.Errorf("plugin %d changed:\n%s\n%s", i, before[i], after[i])
		}
	}
	if compact(t, after[3]) != plugin {
		t.Errorf("memif entry %s", after[3])
	}
	l, _ := libcni.ConfListFromBytes(out)
	if l.Name != "k8s-pod-network" || l.CNIVersion != "0.3.1" {
		t.Errorf("name/version lost: %q %q", l.Name, l.CNIVersion)
	}
	// Idempotent: a second install changes nothing.
	out2, changed, err := Insert(out, []byte(plugin))
	if err != nil || changed || !bytes.Equal(out, out2) {
		t.Errorf("second Insert: changed=%v err=%v", changed, err)
	}
	if !Has(out, []byte(plugin)) || Has([]byte(calico), []byte(plugin)) {
		t.Error("Has disagrees with Insert")
	}
}

func TestInsertReplacesAnOlderEntry(t *testing.T) {
	old, _, _ := Insert([]byte(calico), []byte(`{"type":"memif-cni","timeoutSeconds":3}`))
	// Someone appended another plugin after ours since.
	var c map[string]any
	json.Unmarshal(old, &c)
	c["plugins"] = append(c["plugins"].([]any), map[string]any{"type": "tuning"})
	withTuning, _ := json.Marshal(c)
	out, changed, err := Insert(withTuning, []byte(plugin))
	if err != nil || !changed {
		t.Fatalf("changed=%v err=%v", changed, err)
	}
	if got := strings.Join(types(t, out), ","); got != "calico,portmap,bandwidth,tuning,memif-cni" {
		t.Errorf("plugin order %s", got)
	}
	if strings.Contains(string(out), "timeoutSeconds") {
		t.Errorf("old entry kept:\n%s", out)
	}
}

func TestRemoveRestores(t *testing.T) {
	in, _, _ := Insert([]byte(calico), []byte(plugin))
	out, changed, err := Remove(in)
	if err != nil || !changed {
		t.Fatalf("changed=%v err=%v", changed, err)
	}
	if got := strings.Join(types(t, out), ","); got != "calico,portmap,bandwidth" {
		t.Errorf("after Remove: %s", got)
	}
	if _, changed, err := Remove(out); changed || err != nil {
		t.Errorf("Remove without an entry: changed=%v err=%v", changed, err)
	}
}

func TestInsertErrors(t *testing.T) {
	for _, c := range []struct{ conf, plugin, want string }{
		{calico, `{"type":"bridge"}`, `"type": "memif-cni"`},
		{calico, `{"type":"memif-cni",`, "plugin config"},
		{`{"cniVersion":"1.0.0","name":"x","plugins":[{"type":"memif-cni"}]}`, plugin, "no plugin besides memif-cni"},
		{`{"cniVersion":"1.0.0","name":"x","plugins":[]}`, plugin, "empty list"},
		{`{"cniVersion":"1.0.0","name":"x"}`, plugin, `neither "plugins" nor "type"`},
		{`not json`, plugin, "invalid character"},
	} {
		if _, _, err := Insert([]byte(c.conf), []byte(c.plugin)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Insert(%s, %s): %v, want an error containing %q", c.conf, c.plugin, err, c.want)
		}
	}
}

func TestPrimaryIsTheRuntimesChoice(t *testing.T) {
	dir := t.TempDir()
	if _, err := Primary(dir); err == nil || !strings.Contains(err.Error(), "no CNI configuration") {
		t.Errorf("empty dir: %v", err)
	}
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("99-loopback.conf", `{"cniVersion":"1.0.0","name":"lo","type":"loopback"}`)
	write("10-calico.conflist", calico)
	write("05-broken.conflist", `{"plugins":`)
	write("00-readme.txt", "not a config")
	write("01-calico.conflist.memifnet-tmp", calico) // our own temporary file
	p, err := Primary(dir)
	if err != nil || filepath.Base(p) != "10-calico.conflist" {
		t.Errorf("Primary = %q, %v; want 10-calico.conflist", p, err)
	}
}

func TestInstallFileConvertsAConfAndKeepsTheMode(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "10-flannel.conf")
	if err := os.WriteFile(conf, []byte(`{"cniVersion":"0.4.0","name":"cbr0","type":"flannel","delegate":{"isDefaultGateway":true}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	wrote, err := InstallFile(conf, []byte(plugin))
	if err != nil || wrote != filepath.Join(dir, "10-flannel.conflist") {
		t.Fatalf("InstallFile = %q, %v", wrote, err)
	}
	if _, err := os.Stat(conf); !os.IsNotExist(err) {
		t.Errorf("the .conf is still there: %v", err)
	}
	data, _ := os.ReadFile(wrote)
	if got := strings.Join(types(t, data), ","); got != "flannel,memif-cni" {
		t.Errorf("types %s", got)
	}
	l, _ := libcni.ConfListFromBytes(data)
	if l.Name != "cbr0" || l.CNIVersion != "0.4.0" || !strings.Contains(string(l.Plugins[0].Bytes), "isDefaultGateway") {
		t.Errorf("converted list lost the plugin's settings:\n%s", data)
	}
	if fi, _ := os.Stat(wrote); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want the original 0600", fi.Mode().Perm())
	}
	if p, _ := Primary(dir); p != wrote {
		t.Errorf("Primary after the conversion = %q", p)
	}
	if again, err := InstallFile(wrote, []byte(plugin)); again != "" || err != nil {
		t.Errorf("second InstallFile = %q, %v; want no change", again, err)
	}
	if changed, err := UninstallFile(wrote); !changed || err != nil {
		t.Fatalf("UninstallFile: %v %v", changed, err)
	}
	data, _ = os.ReadFile(wrote)
	if got := strings.Join(types(t, data), ","); got != "flannel" {
		t.Errorf("after uninstall: %s", got)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(left) != 1 {
		t.Errorf("files left: %q", left)
	}
}
