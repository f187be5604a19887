package cdi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	cdilib "tags.cncf.io/container-device-interface/pkg/cdi"
)

func slotSpec(kind string, devs ...string) Spec {
	s := Spec{Kind: kind}
	for _, d := range devs {
		s.Devices = append(s.Devices, Device{Name: d, ContainerEdits: ContainerEdits{
			Env:    []string{"MEMIFNET_SOCKETS=" + d},
			Mounts: []*Mount{{HostPath: "/run/memifnet/slots/" + d, ContainerPath: "/run/memifnet/" + d, Options: []string{"rbind", "rw"}}},
		}})
	}
	return s
}

// What the Writer writes, the CDI project's own reader (the runtimes') takes: it parses and
// validates the file, and finds each device under the name Allocate and Prepare return.
func TestWrittenSpecReadsBack(t *testing.T) {
	w := Writer{Dir: filepath.Join(t.TempDir(), "cdi")}
	if err := w.Write(slotSpec("memifnet.io/socket", "slot-000", "slot-001")); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteNamed("memifnet.io-claim_uid-1", slotSpec("memifnet.io/claim", "0f1e-uid-1-dra-slot-000")); err != nil {
		t.Fatal(err)
	}
	for file, devs := range map[string][]string{
		"memifnet.io-socket.json":      {"slot-000", "slot-001"},
		"memifnet.io-claim_uid-1.json": {"0f1e-uid-1-dra-slot-000"},
	} {
		s, err := cdilib.ReadSpec(filepath.Join(w.Dir, file), 0)
		if err != nil {
			t.Fatalf("the CDI reader refuses %s: %v", file, err)
		}
		if s.Version != Version {
			t.Errorf("%s: version %s, want %s", file, s.Version, Version)
		}
		for _, d := range devs {
			dev := s.GetDevice(d)
			if dev == nil {
				t.Fatalf("%s: no device %s", file, d)
			}
			if got, want := dev.GetQualifiedName(), QualifiedName(s.Kind, d); got != want {
				t.Errorf("device %s: the reader's name %q, ours %q", d, got, want)
			}
		}
	}
}

// A spec the runtime would refuse at container start is refused at write, naming why, and the
// spec already there stays.
func TestWriteRefusesBadSpec(t *testing.T) {
	w := Writer{Dir: t.TempDir()}
	good := slotSpec("memifnet.io/claim", "a")
	if err := w.WriteNamed("x", good); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(w.Dir, "x.json"))
	if err != nil {
		t.Fatal(err)
	}
	noHost := slotSpec("memifnet.io/claim", "a")
	noHost.Devices[0].ContainerEdits.Mounts[0].HostPath = ""
	badEnv := slotSpec("memifnet.io/claim", "a")
	badEnv.Devices[0].ContainerEdits.Env = []string{"NOEQUALS"}
	for name, c := range map[string]struct {
		spec Spec
		want string
	}{
		"kind without class": {slotSpec("memifnet.io", "a"), "memifnet.io"},
		"bad device name":    {slotSpec("memifnet.io/claim", "a/b"), "a/b"},
		"device twice":       {slotSpec("memifnet.io/claim", "a", "a"), `"a" named twice`},
		"mount without host": {noHost, "device \"a\""},
		"env without value":  {badEnv, "NOEQUALS"},
	} {
		err := w.WriteNamed("x", c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "cdi spec x") {
			t.Errorf("%s: %v, want a refusal naming %q", name, err, c.want)
		}
	}
	if after, err := os.ReadFile(filepath.Join(w.Dir, "x.json")); err != nil || string(after) != string(before) {
		t.Errorf("the spec already there changed: %v\n%s", err, after)
	}
}

func TestRemove(t *testing.T) {
	w := Writer{Dir: t.TempDir()}
	if err := w.WriteNamed("x", slotSpec("memifnet.io/claim", "a")); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second: already gone, not an error
		if err := w.Remove("x"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(w.Dir, "x.json")); !os.IsNotExist(err) {
		t.Errorf("spec still there: %v", err)
	}
}
