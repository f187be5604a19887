package dpdkpeer

import (
	"slices"
	"testing"
)

// TestVdev: a whole device argument replaces the one the fields build, and nothing else changes.
func TestVdev(t *testing.T) {
	const vdev = "net_memif10005,role=server,id=5,socket=/run/x.sock,socket-abstract=no,rsize=10,bsize=256,zero-copy=no"
	o, err := Options{Role: "server", Socket: "/run/x.sock", FSSocket: true, Vdev: vdev, Prefix: "p"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	args := o.command()
	i := slices.Index(args, "--vdev")
	if i < 0 || args[i+1] != vdev || slices.Index(args[i+1:], "--vdev") >= 0 {
		t.Fatalf("command %q: want one --vdev %s", args, vdev)
	}
	o.Vdev = ""
	if got := o.command(); got[i+1] == vdev {
		t.Fatalf("without Vdev the fields build the device: %q", got[i+1])
	}
}
