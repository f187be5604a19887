package portmetrics

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestCNIPorts: the ports come from memif-cni's attachment records (a record as memif-cni
// writes it, with fields this reader does not need); a half-written record and a slot name
// with a slash are skipped.
func TestCNIPorts(t *testing.T) {
	state := t.TempDir()
	dir := filepath.Join(state, "state", "attachments")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"c1_net1.json": `{"network":"memif","containerID":"c1","ifName":"net1","namespace":"ns","pod":"east","podUID":"u1",
  "ports":[{"name":"p0","slot":"slot-003","link":"l1","mode":"ethernet","role":"server","devInfo":"x","slotMount":{"dev":1,"ino":2}},
           {"name":"up","slot":"slot-004","mode":"ip","devInfo":"y"},{"name":"bad","slot":"../x","mode":"ip","devInfo":"z"}]}`,
		"c2_net1.json": `{"namespace":"ns","pod":"we`,
		"c1_net1.lock": ``,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Merge(CNIPorts(state), CNIPorts(filepath.Join(state, "none")))()
	if err != nil {
		t.Fatal(err)
	}
	want := []Port{
		{Namespace: "ns", Pod: "east", Port: "p0", Link: "l1", Slot: "slot-003"},
		{Namespace: "ns", Pod: "east", Port: "up", Slot: "slot-004"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}
