// Package numa reads the host's NUMA nodes from sysfs (the root is a
// parameter so tests can fake a two-node machine) and chooses device sets
// that stay on one node.
package numa

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Nodes lists the NUMA node numbers under <sysfsRoot>/devices/system/node.
// A kernel without NUMA has no such directory; that is one node, 0.
func Nodes(sysfsRoot string) ([]int, error) {
	dir := filepath.Join(sysfsRoot, "devices", "system", "node")
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return []int{0}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read numa nodes: %w", err)
	}
	var nodes []int
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), "node")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(rest)
		if err != nil || n < 0 {
			continue
		}
		nodes = append(nodes, n)
	}
	if len(nodes) == 0 {
		return []int{0}, nil
	}
	sort.Ints(nodes)
	return nodes, nil
}

// Candidate is a device that may be chosen.
type Candidate struct {
	ID   string
	Node int
	// Clean devices need no scrub at Allocate, so they are preferred.
	Clean bool
}

// Prefer picks size devices out of available: all of mustInclude first, then
// devices from the one NUMA node that can hold the whole request (the node of
// mustInclude when they share one, else the node with most free devices).
// Only when no node can hold it does the choice spill over to other nodes,
// fullest first. Within a node clean devices come first, then by order of
// available. The result is deterministic for a given input.
func Prefer(available []Candidate, mustInclude []string, size int) []string {
	if size <= 0 {
		return nil
	}
	byID := make(map[string]Candidate, len(available))
	for _, c := range available {
		byID[c.ID] = c
	}
	var out []string
	taken := map[string]bool{}
	mustNodes := map[int]bool{}
	for _, id := range mustInclude {
		if taken[id] {
			continue
		}
		taken[id] = true
		out = append(out, id)
		if c, ok := byID[id]; ok {
			mustNodes[c.Node] = true
		}
	}
	if len(out) >= size {
		return out[:size]
	}

	free := map[int][]Candidate{}
	var order []int
	for _, c := range available {
		if taken[c.ID] {
			continue
		}
		if _, ok := free[c.Node]; !ok {
			order = append(order, c.Node)
		}
		free[c.Node] = append(free[c.Node], c)
	}
	for _, n := range order {
		// Stable: keeps the caller's order among equally clean devices.
		sort.SliceStable(free[n], func(i, j int) bool { return free[n][i].Clean && !free[n][j].Clean })
	}
	need := size - len(out)
	// Rank nodes: a node holding all must-include devices and enough free
	// devices wins; then any node with enough; then most free; then lowest.
	sort.SliceStable(order, func(i, j int) bool {
		a, b := order[i], order[j]
		fitA, fitB := len(free[a]) >= need, len(free[b]) >= need
		mustA := len(mustNodes) == 1 && mustNodes[a]
		mustB := len(mustNodes) == 1 && mustNodes[b]
		if fitA && mustA != (fitB && mustB) {
			return fitA && mustA
		}
		if fitA != fitB {
			return fitA
		}
		if len(free[a]) != len(free[b]) {
			return len(free[a]) > len(free[b])
		}
		return a < b
	})
	for _, n := range order {
		for _, c := range free[n] {
			if len(out) == size {
				return out
			}
			out = append(out, c.ID)
		}
	}
	return out
}
