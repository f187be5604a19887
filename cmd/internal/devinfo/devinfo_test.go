package devinfo

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesAndRemoveIsIdempotent(t *testing.T) {
	dir := t.TempDir()
	w := Writer{Dir: filepath.Join(dir, "dp")}
	if got := w.Path("memifnet.io/socket", "slot-003"); got != filepath.Join(dir, "dp", "memifnet.io-socket-slot-003-device.json") {
		t.Fatalf("device plugin path %s", got)
	}
	for _, path := range []string{"/run/memifnet/slot-003/memif.sock", "/run/memifnet/slot-003/link/memif.sock"} {
		if err := w.WriteMemif("memifnet.io/socket", "slot-003", path); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(w.Path("memifnet.io/socket", "slot-003"))
		if err != nil {
			t.Fatal(err)
		}
		var info Info
		if err := json.Unmarshal(b, &info); err != nil {
			t.Fatal(err)
		}
		if info.Type != "memif" || info.Version != "1.1.0" || info.Memif == nil || info.Memif.Path != path {
			t.Fatalf("file holds %s", b)
		}
	}
	for range 2 {
		if err := w.Remove("memifnet.io/socket", "slot-003"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(w.Path("memifnet.io/socket", "slot-003")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file left: %v", err)
	}
	cni := CNIPath(dir, "abc", "net1", "east")
	if cni != filepath.Join(dir, "cni", "memifnet-abc_net1-east-device.json") {
		t.Fatalf("CNI path %s", cni)
	}
	if err := Write(cni, Info{Type: "memif", Version: Version, Memif: &Memif{Role: SpecRole("server"), Mode: SpecMode("punt-inject")}}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(cni)
	if string(b) != `{"type":"memif","version":"1.1.0","memif":{"role":"master","path":"","mode":"inject-punt"}}` {
		t.Fatalf("CNI file %s", b)
	}
	if SpecRole("client") != "slave" || SpecMode("ethernet") != "ethernet" {
		t.Fatal("spec mapping")
	}
}
