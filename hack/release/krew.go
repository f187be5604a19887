package main

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// krewFile is the Krew plugin manifest in the release; Krew wants it named after the plugin
// (memifnet.yaml) when it goes into an index, and `kubectl krew install --manifest` takes it as is.
const krewFile = "krew/memifnet.yaml"

// The Krew plugin manifest (krew.googlecontainertools.github.com/v1alpha2 Plugin, as krew's
// "Writing Krew plugin manifests" describes it); only the fields memifnet uses.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec krewSpec `json:"spec"`
}

type krewSpec struct {
	Version          string         `json:"version"`
	Homepage         string         `json:"homepage"`
	ShortDescription string         `json:"shortDescription"`
	Description      string         `json:"description"`
	Platforms        []krewPlatform `json:"platforms"`
}

type krewPlatform struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	URI    string     `json:"uri"`
	SHA256 string     `json:"sha256"`
	Files  []krewFrom `json:"files"`
	Bin    string     `json:"bin"`
}

type krewFrom struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// pluginArchive is the kubectl-memifnet archive's name for p.
func pluginArchive(version string, p platform) string {
	return fmt.Sprintf("%s_%s_%s_%s.tar.gz", pluginCmd, version, p.OS, p.Arch)
}

// writePlugin writes a tar.gz per plugin platform (the binary and LICENSE) and the Krew
// manifest naming each archive's URL and SHA-256.
func writePlugin(c config, b *builds, dir string) error {
	k := krewPlugin{APIVersion: "krew.googlecontainertools.github.com/v1alpha2", Kind: "Plugin"}
	k.Metadata.Name = "memifnet"
	k.Spec = krewSpec{
		Version:          c.Version,
		Homepage:         "https://github.com/memifnet/memifnet",
		ShortDescription: "Show memif links, ports and slots, and why a link is down",
		Description: "Lists the memif links, ports and slots of a cluster running memifnet " +
			"(shared-memory packet links between pods) and explains why a link is not up.\n",
	}
	for _, p := range pluginPlatforms {
		name := pluginArchive(c.Version, p)
		out := filepath.Join(dir, name)
		files := map[string]string{pluginCmd: b.Plugin[p], "LICENSE": filepath.Join(c.Root, "LICENSE")}
		if err := tarGz(out, []string{pluginCmd, "LICENSE"}, files, pluginCmd); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		sum, err := fileSHA256(out)
		if err != nil {
			return err
		}
		kp := krewPlatform{URI: c.URLBase + "/" + c.Version + "/" + name, SHA256: sum, Bin: pluginCmd,
			Files: []krewFrom{{From: pluginCmd, To: "."}, {From: "LICENSE", To: "."}}}
		kp.Selector.MatchLabels = map[string]string{"os": p.OS, "arch": p.Arch}
		k.Spec.Platforms = append(k.Spec.Platforms, kp)
	}
	y, err := yaml.Marshal(k)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(krewFile)), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, krewFile), y, 0o644)
}
