package numa

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestNodes(t *testing.T) {
	root := t.TempDir()
	got, err := Nodes(root)
	if err != nil || !reflect.DeepEqual(got, []int{0}) {
		t.Fatalf("no sysfs: got %v %v", got, err)
	}
	for _, d := range []string{"node1", "node0", "node10", "possible", "nodeX"} {
		if err := os.MkdirAll(filepath.Join(root, "devices/system/node", d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got, err = Nodes(root)
	if err != nil || !reflect.DeepEqual(got, []int{0, 1, 10}) {
		t.Fatalf("got %v %v", got, err)
	}
}

func cands(spec map[int][]string, dirty ...string) []Candidate {
	isDirty := map[string]bool{}
	for _, d := range dirty {
		isDirty[d] = true
	}
	var out []Candidate
	for _, n := range []int{0, 1, 2} {
		for _, id := range spec[n] {
			out = append(out, Candidate{ID: id, Node: n, Clean: !isDirty[id]})
		}
	}
	return out
}

func TestPrefer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		avail []Candidate
		must  []string
		size  int
		want  []string
	}{
		{"fullest node", cands(map[int][]string{0: {"a0"}, 1: {"b0", "b1", "b2"}}), nil, 2, []string{"b0", "b1"}},
		{"tie lowest node", cands(map[int][]string{0: {"a0", "a1"}, 1: {"b0", "b1"}}), nil, 2, []string{"a0", "a1"}},
		{"fit beats fuller", cands(map[int][]string{0: {"a0", "a1", "a2"}, 1: {"b0", "b1", "b2", "b3"}}), []string{"a1"}, 3, []string{"a1", "a0", "a2"}},
		{"must node", cands(map[int][]string{0: {"a0", "a1", "a2"}, 1: {"b0", "b1", "b2", "b3"}}), []string{"b3"}, 2, []string{"b3", "b0"}},
		{"clean first", cands(map[int][]string{0: {"a0", "a1", "a2"}}, "a0"), nil, 2, []string{"a1", "a2"}},
		{"spill", cands(map[int][]string{0: {"a0"}, 1: {"b0", "b1"}}), nil, 3, []string{"b0", "b1", "a0"}},
		{"must only", cands(map[int][]string{0: {"a0"}, 1: {"b0"}}), []string{"a0", "b0"}, 2, []string{"a0", "b0"}},
		{"zero", cands(map[int][]string{0: {"a0"}}), nil, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Prefer(tc.avail, tc.must, tc.size)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v want %v", got, tc.want)
			}
		})
	}
}
