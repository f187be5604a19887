// Command memif-cni is the CNI plugin of memifnet: at pod sandbox creation it wires the memif
// ports a pod asks for in its memifnet.io/ports annotation to the socket slots the device plugin
// gave it. See docs/cni.md.
package main

import (
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/memifnet/memifnet/cmd/memif-cni/internal/plugin"
)

// buildVersion is set by the linker (-X main.buildVersion=...).
var buildVersion = "dev"

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    plugin.Add,
		Del:    plugin.Del,
		Check:  plugin.Check,
		Status: plugin.Status,
		GC:     plugin.GC,
	}, version.All, "memif-cni "+buildVersion)
}
