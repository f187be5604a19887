package names

import (
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
)

// agentRooms are the node agent's rooms (cmd/memif-deviceplugin/internal/<room>/...), each with
// the other rooms its packages may import (tests included): docs/design.md, "The node agent's
// rooms". The providers know nothing of either backend, the two backends know nothing of each
// other (what both need is in device), the backends feed observe and never the other way, and
// only daemon, the wiring, sees every room.
var agentRooms = map[string][]string{
	"config":       nil,
	"device":       {"config"},
	"deviceplugin": {"device"},
	"dra":          {"device", "observe", "config"},
	"observe":      {"device"},
	"uninstall":    nil,
	"daemon":       {"config", "device", "deviceplugin", "dra", "observe", "uninstall"},
}

const agentInternal = "cmd/memif-deviceplugin/internal/"

// TestAgentRooms keeps the node agent's packages in their rooms: a package is in a room of
// agentRooms (a new flat package, or a new room nobody documented, fails), and a room imports
// only the rooms it may.
func TestAgentRooms(t *testing.T) {
	entries, err := os.ReadDir("../../" + agentInternal)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := agentRooms[e.Name()]; !ok {
			t.Errorf("%s%s is not one of the agent's rooms (%s): put the package in the room of its job, or add a room here and to docs/design.md",
				agentInternal, e.Name(), strings.Join(roomNames(), ", "))
		}
	}
	design, err := os.ReadFile("../../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	for room := range agentRooms {
		if !strings.Contains(string(design), "`"+room+"/`") {
			t.Errorf("docs/design.md does not show the agent's room `%s/`", room)
		}
	}
	importers, _ := moduleImporters(t)
	edges := 0
	for pkg, by := range importers {
		to, ok := agentRoom(pkg)
		if !ok {
			continue
		}
		for from := range by {
			fromRoom, ok := agentRoom(from)
			if !ok || fromRoom == to {
				continue
			}
			edges++
			if !slices.Contains(agentRooms[fromRoom], to) {
				t.Errorf("%s (room %s) imports %s (room %s): %s may import only %v", from, fromRoom, pkg, to, fromRoom, agentRooms[fromRoom])
			}
		}
	}
	if edges < 10 {
		t.Fatalf("found only %d imports between the agent's rooms: is go list's output what this test expects?", edges)
	}
}

// agentRoom is the room of an agent package (path without the module prefix).
func agentRoom(pkg string) (string, bool) {
	rest, ok := strings.CutPrefix(pkg, agentInternal)
	if !ok {
		return "", false
	}
	room, _, _ := strings.Cut(rest, "/")
	return room, true
}

func roomNames() []string {
	var ns []string
	for n := range agentRooms {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}
