// Package conflist edits a node's CNI network configuration the way a chained plugin installer
// must: find the runtime's primary configuration, append the memif-cni entry to its plugin list
// (converting a single-plugin .conf to a .conflist), and take it out again. Plugins other than
// memif-cni are kept byte for byte (re-indented); top-level keys keep a stable order.
package conflist

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/memifnet/memifnet/internal/safefs"
)

// PluginType is the CNI type the installer manages.
const PluginType = "memif-cni"

// Extensions the runtimes read (libcni ConfFiles), in the order of precedence they ignore:
// the first file by name wins whatever its extension.
var Extensions = []string{".conf", ".conflist", ".json"}

// Primary returns the file the runtime uses: the first by name in dir with a CNI extension that
// holds a valid configuration (a list with plugins, or a single plugin with a type).
func Primary(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && hasExt(e.Name()) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var skipped []string
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return "", err
		}
		if _, err := parse(b); err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %v", n, err))
			continue
		}
		return filepath.Join(dir, n), nil
	}
	if len(skipped) > 0 {
		return "", fmt.Errorf("no valid CNI configuration in %s (%s)", dir, strings.Join(skipped, "; "))
	}
	return "", fmt.Errorf("no CNI configuration in %s yet (the primary network plugin writes it)", dir)
}

func hasExt(name string) bool {
	for _, e := range Extensions {
		if strings.HasSuffix(name, e) {
			return true
		}
	}
	return false
}

// conf is a decoded configuration: top-level keys, and the plugins kept raw.
type conf struct {
	top     map[string]json.RawMessage
	plugins []json.RawMessage
	single  bool // it was a single-plugin .conf
}

func parse(b []byte) (*conf, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, err
	}
	c := &conf{top: top}
	if raw, ok := top["plugins"]; ok {
		if err := json.Unmarshal(raw, &c.plugins); err != nil {
			return nil, fmt.Errorf("plugins: %w", err)
		}
		if len(c.plugins) == 0 {
			return nil, errors.New("plugins: empty list")
		}
		for i, p := range c.plugins {
			if typeOf(p) == "" {
				return nil, fmt.Errorf("plugins[%d]: no type", i)
			}
		}
		return c, nil
	}
	if _, ok := top["type"]; !ok {
		return nil, errors.New(`neither "plugins" nor "type"`)
	}
	// A single plugin: the list keeps cniVersion and name at the top, the rest is the plugin.
	c.single = true
	plugin := map[string]json.RawMessage{}
	c.top = map[string]json.RawMessage{}
	for k, v := range top {
		switch k {
		case "cniVersion", "name":
			c.top[k] = v
		default:
			plugin[k] = v
		}
	}
	p, err := json.Marshal(plugin)
	if err != nil {
		return nil, err
	}
	c.plugins = []json.RawMessage{p}
	return c, nil
}

func typeOf(p json.RawMessage) string {
	var t struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(p, &t)
	return t.Type
}

// topOrder is the order of well-known top-level keys; others follow sorted.
var topOrder = []string{"cniVersion", "cniVersions", "name", "disableCheck", "disableGC", "loadOnlyInlinedPlugins", "plugins"}

func (c *conf) marshal() ([]byte, error) {
	p, err := json.Marshal(c.plugins)
	if err != nil {
		return nil, err
	}
	c.top["plugins"] = p
	keys := make([]string, 0, len(c.top))
	rank := map[string]int{}
	for i, k := range topOrder {
		rank[k] = i + 1
	}
	for k := range c.top {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		ri, rj := rank[keys[i]], rank[keys[j]]
		switch {
		case ri != 0 && rj != 0:
			return ri < rj
		case ri != 0 || rj != 0:
			return ri != 0
		}
		return keys[i] < keys[j]
	})
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(c.top[k])
	}
	buf.WriteByte('}')
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// Insert returns the configuration with plugin (a JSON object of type memif-cni) as the last
// entry of the list, replacing any memif-cni entry there was. changed is false when the input
// already was exactly that.
func Insert(data []byte, plugin []byte) (out []byte, changed bool, err error) {
	if typeOf(plugin) != PluginType {
		return nil, false, fmt.Errorf("plugin config must be a JSON object with \"type\": %q", PluginType)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, plugin); err != nil {
		return nil, false, fmt.Errorf("plugin config: %w", err)
	}
	c, err := parse(data)
	if err != nil {
		return nil, false, err
	}
	kept := c.plugins[:0]
	for _, p := range c.plugins {
		if typeOf(p) != PluginType {
			kept = append(kept, p)
		}
	}
	if len(kept) == 0 {
		return nil, false, errors.New("the configuration has no plugin besides memif-cni: memif-cni chains after a primary plugin that gives the pod its eth0")
	}
	c.plugins = append(kept, compact.Bytes())
	out, err = c.marshal()
	if err != nil {
		return nil, false, err
	}
	return out, c.single || !sameJSON(data, out), nil
}

// Remove returns the configuration without memif-cni entries. A list left with one plugin stays
// a list (valid for every runtime).
func Remove(data []byte) (out []byte, changed bool, err error) {
	c, err := parse(data)
	if err != nil {
		return nil, false, err
	}
	kept := c.plugins[:0]
	for _, p := range c.plugins {
		if typeOf(p) != PluginType {
			kept = append(kept, p)
		}
	}
	if len(kept) == len(c.plugins) {
		return data, false, nil
	}
	c.plugins = kept
	out, err = c.marshal()
	return out, err == nil, err
}

// Has reports whether the configuration lists plugin exactly (as Insert would leave it).
func Has(data, plugin []byte) bool {
	out, changed, err := Insert(data, plugin)
	return err == nil && !changed && out != nil
}

func sameJSON(a, b []byte) bool {
	var x, y bytes.Buffer
	if json.Compact(&x, a) != nil || json.Compact(&y, b) != nil {
		return false
	}
	return bytes.Equal(x.Bytes(), y.Bytes())
}

// WriteFile replaces path atomically and durably (a torn conflist would break every pod's
// networking) with the given mode (0: the old file's, or 0644 for a new one). The temporary file
// has no CNI extension, so a runtime watching the directory never reads it.
func WriteFile(path string, data []byte, mode os.FileMode) error {
	if mode == 0 {
		mode = 0o644
		if fi, err := os.Stat(path); err == nil {
			mode = fi.Mode().Perm()
		}
	}
	return safefs.WriteFile(path, data, mode, safefs.WriteOptions{Durable: true})
}

// MultusTypes are the plugin types of Multus's own configuration: the thin plugin's, and the
// shim the thick plugin's daemon writes.
var MultusTypes = []string{"multus", "multus-shim"}

// MultusError says the primary configuration is Multus's. memif-cni is not chained there: Multus
// (or, on OpenShift, the cluster network operator) owns and rewrites that file, and every pod's
// memif ports would be wired outside Multus's view; memif-cni goes in a NetworkAttachmentDefinition.
type MultusError struct {
	File, Type string
}

func (e *MultusError) Error() string {
	return fmt.Sprintf("%s is Multus's configuration (plugin type %q): memif-cni is not chained into it; "+
		"attach memif-cni through a NetworkAttachmentDefinition instead (manifests/overlays/multus, docs/cni.md)", e.File, e.Type)
}

// multusType returns the first Multus plugin type of data, or "".
func multusType(data []byte) string {
	c, err := parse(data)
	if err != nil {
		return ""
	}
	for _, p := range c.plugins {
		if t := typeOf(p); slices.Contains(MultusTypes, t) {
			return t
		}
	}
	return ""
}

// InstallFile chains plugin into the primary configuration file. A single-plugin .conf becomes
// <name>.conflist (and the .conf goes), as the runtime only reads lists from .conflist files.
// It returns the file written, or "" when nothing had to change. It refuses Multus's own
// configuration (*MultusError) and leaves it as it is.
func InstallFile(path string, plugin []byte) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if t := multusType(data); t != "" {
		return "", &MultusError{File: path, Type: t}
	}
	out, changed, err := Insert(data, plugin)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if !changed {
		return "", nil
	}
	target := path
	if !strings.HasSuffix(path, ".conflist") {
		target = strings.TrimSuffix(path, filepath.Ext(path)) + ".conflist"
	}
	if err := WriteFile(target, out, fi.Mode().Perm()); err != nil {
		return "", err
	}
	if target != path {
		if err := os.Remove(path); err != nil {
			return "", err
		}
	}
	return target, nil
}

// UninstallFile takes memif-cni out of path; it reports whether the file changed.
func UninstallFile(path string) (bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	out, changed, err := Remove(data)
	if err != nil || !changed {
		return false, err
	}
	return true, WriteFile(path, out, 0)
}
