package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"
)

// devInfoFile is an NPWG device-info document as the spec (1.1.0) spells it.
type devInfoFile struct {
	Type    string `json:"type"`
	Version string `json:"version"`
	Memif   *struct {
		Role string `json:"role"`
		Path string `json:"path"`
		Mode string `json:"mode"`
	} `json:"memif"`
}

func readDevInfo(t *testing.T, file string) devInfoFile {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("device-info: %v", err)
	}
	var d devInfoFile
	if err := json.Unmarshal(b, &d); err != nil || d.Memif == nil {
		t.Fatalf("device-info %s: %q (%v)", file, b, err)
	}
	return d
}

// TestDeviceInfoEveryPort wires one attachment with one, two and three ports, as Multus calls
// it: with the CNIDeviceInfoFile capability and that file already holding the device plugin's
// placeholder (Multus copies it there when the network names a resource). Every port gets its own
// device-info file describing it; the result lists every port as an interface in the sandbox,
// which is what Multus makes one network-status entry of each; the runtime's file describes the
// port only when there is one, since Multus copies it into every entry of the attachment. DEL
// takes every file, and again finds nothing to do.
func TestDeviceInfoEveryPort(t *testing.T) {
	all := []string{
		`{"name":"up","peer":"host"}`,
		`{"name":"east","link":"chain-7"}`,
		`{"name":"ipp","link":"chain-8","role":"client","mode":"ip"}`,
	}
	for count := 1; count <= len(all); count++ {
		t.Run(fmt.Sprintf("%d-ports", count), func(t *testing.T) {
			n := newNode(t, 3)
			n.extra["capabilities"] = map[string]bool{"io.kubernetes.cri.pod-annotations": true, "CNIDeviceInfoFile": true}
			slots := []string{"slot-000", "slot-001", "slot-002"}[:count]
			p := n.newPod("["+strings.Join(all[:count], ",")+"]", slots...)
			runtimeFile := filepath.Join(n.devinfoDir, "cni", "memif-"+p.ContainerID+"_net1")
			placeholder := `{"type":"memif","version":"1.1.0","memif":{"role":"slave","path":"/run/memifnet/slot-000/memif.sock","mode":"ethernet"}}`
			if err := os.MkdirAll(filepath.Dir(runtimeFile), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(runtimeFile, []byte(placeholder), 0o644); err != nil {
				t.Fatal(err)
			}
			rt := p.rt(true)
			rt.CapabilityArgs["CNIDeviceInfoFile"] = runtimeFile
			raw, err := n.cni.AddNetworkList(context.Background(), n.confList(), rt)
			if err != nil {
				t.Fatalf("ADD: %v", err)
			}
			res, err := current.NewResultFromResult(raw)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Interfaces) != count {
				t.Fatalf("result has %d interfaces for %d ports: %+v", len(res.Interfaces), count, res.Interfaces)
			}
			var files []string
			for i, iface := range res.Interfaces {
				files = append(files, assertPortDevInfo(t, n, p, iface, slots[i]))
			}
			assertRuntimeDevInfo(t, n, runtimeFile, files, count)
			assertOnlyFiles(t, filepath.Join(n.devinfoDir, "cni"), append(files, runtimeFile))

			if err := n.cni.DelNetworkList(context.Background(), n.confList(), rt); err != nil {
				t.Fatalf("DEL: %v", err)
			}
			if err := n.cni.DelNetworkList(context.Background(), n.confList(), rt); err != nil {
				t.Fatalf("second DEL: %v", err)
			}
			if err := n.delBare(p); err != nil {
				t.Fatalf("DEL without netns and prevResult: %v", err)
			}
			n.assertClean() // the runtime's file included: it is under devinfo/cni
		})
	}
}

// assertPortDevInfo checks the port's result interface and its device-info file against the
// port.json ADD wrote in its slot, and returns the file.
func assertPortDevInfo(t *testing.T, n *node, p *pod, iface *current.Interface, slot string) string {
	t.Helper()
	if iface.Sandbox != p.NS.Path() {
		t.Fatalf("interface %s is not in the pod's sandbox (Multus lists only those): %+v", iface.Name, iface)
	}
	spec := n.hostSpec(slot)
	file := filepath.Join(n.devinfoDir, "cni", "memifnet-"+p.ContainerID+"_net1-"+iface.Name+"-device.json")
	// The uninstall (memif-deviceplugin's teardown) removes memifnet-*-device.json there.
	if base := filepath.Base(file); !strings.HasPrefix(base, "memifnet-") || !strings.HasSuffix(base, "-device.json") {
		t.Fatalf("%s is not a name the uninstall removes", base)
	}
	d := readDevInfo(t, file)
	wantRole := map[string]string{"server": "master", "client": "slave"}[spec.Role]
	if spec.Name != iface.Name || d.Type != "memif" || d.Version != "1.1.0" || d.Memif.Role != wantRole ||
		d.Memif.Path != iface.SocketPath || d.Memif.Mode != spec.Mode {
		t.Fatalf("port %s (%s, %s, %s): device-info %+v %+v", iface.Name, spec.Role, spec.Mode, iface.SocketPath, d, *d.Memif)
	}
	return file
}

// assertRuntimeDevInfo: with one port the runtime's file is that port's; with several it is gone,
// so that Multus puts no port's description on another port's network-status entry.
func assertRuntimeDevInfo(t *testing.T, n *node, runtimeFile string, portFiles []string, count int) {
	t.Helper()
	if count > 1 {
		if _, err := os.Stat(runtimeFile); !errors.Is(err, fs.ErrNotExist) {
			b, _ := os.ReadFile(runtimeFile)
			t.Fatalf("runtime device-info file of a %d-port attachment: %q (%v)", count, b, err)
		}
		return
	}
	got, want := readDevInfo(t, runtimeFile), readDevInfo(t, portFiles[0])
	if *got.Memif != *want.Memif || got.Type != want.Type || got.Version != want.Version {
		t.Fatalf("runtime device-info %+v, port's %+v", *got.Memif, *want.Memif)
	}
}

// assertOnlyFiles checks that dir holds exactly the files want (the runtime's may be absent).
func assertOnlyFiles(t *testing.T, dir string, want []string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ok := map[string]bool{}
	for _, w := range want {
		ok[filepath.Base(w)] = true
	}
	for _, e := range ents {
		if !ok[e.Name()] {
			t.Fatalf("unexpected file %s in %s", e.Name(), dir)
		}
	}
	if len(ents) < len(want)-1 {
		t.Fatalf("%s holds %d files, want %d port files", dir, len(ents), len(want)-1)
	}
}
