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

// TestPortArgs: a ready config's ports (memif-testpmd) replace the device the fields build; no
// role or socket is needed then, testpmd runs without taskset when the caller is pinned, and two
// ports can be paired.
func TestPortArgs(t *testing.T) {
	ports := []string{"--vdev=net_memif1,role=server,id=0,socket=/a/memif.sock,socket-abstract=no",
		"--vdev=net_memif2,role=client,id=0,socket=/b/memif.sock,socket-abstract=no,zero-copy=yes", "--single-file-segments"}
	args, err := Options{PortArgs: ports, Pinned: true, Core: 3, Topology: "paired", Memory: NoHuge, Prefix: "p"}.Command()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.Index(args, ports[0])
	if args[0] != "dpdk-testpmd" || i < 0 || !slices.Equal(args[i:i+3], ports) || slices.Contains(args, "--vdev") ||
		!slices.Contains(args, "--port-topology=paired") || !slices.Contains(args, "(0,1)@3") {
		t.Errorf("command %q: want testpmd without taskset on lcore 3, the ports' arguments as given, paired", args)
	}
	for _, o := range []Options{{}, {PortArgs: ports, Topology: "chain"}, {Socket: "/s"}} {
		if _, err := o.Command(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}
