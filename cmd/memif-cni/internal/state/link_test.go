package state

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/memifnet/memifnet/internal/safefs"
)

// fakeDirs is a LinkDirs that remembers which link directories exist, and counts.
type fakeDirs struct {
	dirs          map[string]safefs.Identity
	made, removed int
}

func (f *fakeDirs) Make(ns, name string) (safefs.Identity, error) {
	if _, ok := f.dirs[ns+"/"+name]; ok {
		return safefs.Identity{}, fmt.Errorf("link %s/%s made twice", ns, name)
	}
	f.made++
	id := safefs.Identity{Dev: 1, Ino: 1, Mount: uint64(f.made)}
	f.dirs[ns+"/"+name] = id
	return id, nil
}

func (f *fakeDirs) Check(ns, name string, mount safefs.Identity) error {
	if f.dirs[ns+"/"+name] != mount {
		return fmt.Errorf("link %s/%s: %v, not %v", ns, name, f.dirs[ns+"/"+name], mount)
	}
	return nil
}

func (f *fakeDirs) Remove(ns, name string, mount safefs.Identity) error {
	if err := f.Check(ns, name, mount); err != nil {
		return err
	}
	f.removed++
	delete(f.dirs, ns+"/"+name)
	return nil
}

// TestJoin drives Join (and Leave) through the ways two pods meet on a link: who gets which role,
// which disagreements are refused and with which field, and that a repeated Join changes nothing.
func TestJoin(t *testing.T) {
	type step struct {
		leave    string      // instead of joining: this key leaves
		req      JoinRequest // Key, Role, ID, Mode; Pod and Port are derived from Key
		role     string      // the role Join gives, when it succeeds
		conflict string      // the ConflictError field, when it must fail
	}
	join := func(key, role string, id uint32, mode string) JoinRequest {
		return JoinRequest{Key: key, Role: role, ID: id, Mode: mode}
	}
	for _, tc := range []struct {
		name    string
		steps   []step
		members int // left on the link at the end
	}{
		{"first listens, second dials", []step{
			{req: join("a", "", 0, "ethernet"), role: "server"},
			{req: join("b", "", 0, "ethernet"), role: "client"},
		}, 2},
		{"first asks client", []step{
			{req: join("a", "client", 0, "ethernet"), role: "client"},
			{req: join("b", "", 0, "ethernet"), role: "server"},
		}, 2},
		{"second asks the role left", []step{
			{req: join("a", "", 3, "ip"), role: "server"},
			{req: join("b", "client", 3, "ip"), role: "client"},
		}, 2},
		{"second asks the role taken", []step{
			{req: join("a", "server", 0, "ethernet"), role: "server"},
			{req: join("b", "server", 0, "ethernet"), conflict: "role"},
		}, 1},
		{"both ask client", []step{
			{req: join("a", "client", 0, "ethernet"), role: "client"},
			{req: join("b", "client", 0, "ethernet"), conflict: "role"},
		}, 1},
		{"ids differ", []step{
			{req: join("a", "", 1, "ethernet"), role: "server"},
			{req: join("b", "", 2, "ethernet"), conflict: "id"},
		}, 1},
		{"modes differ", []step{
			{req: join("a", "", 0, "ethernet"), role: "server"},
			{req: join("b", "", 0, "ip"), conflict: "mode"},
		}, 1},
		{"a third pod", []step{
			{req: join("a", "", 0, "ethernet"), role: "server"},
			{req: join("b", "", 0, "ethernet"), role: "client"},
			{req: join("c", "", 0, "ethernet"), conflict: "link"},
		}, 2},
		{"joining again is a no-op", []step{
			{req: join("a", "", 0, "ethernet"), role: "server"},
			{req: join("a", "client", 5, "ip"), role: "server"},
			{req: join("b", "", 0, "ethernet"), role: "client"},
		}, 2},
		{"a pod that left is replaced", []step{
			{req: join("a", "", 0, "ethernet"), role: "server"},
			{req: join("b", "", 0, "ethernet"), role: "client"},
			{leave: "a"},
			{req: join("c", "", 0, "ethernet"), role: "server"},
		}, 2},
		{"the link is new after all left", []step{
			{req: join("a", "", 1, "ethernet"), role: "server"},
			{leave: "a"},
			{req: join("b", "client", 2, "ip"), role: "client"},
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			st := Store{Dir: filepath.Join(root, "state"), Boot: "boot-1"}
			dir := &fakeDirs{dirs: map[string]safefs.Identity{}}
			var secret string
			for i, s := range tc.steps {
				if s.leave != "" {
					if err := st.Leave("ns", "l", dir, s.leave); err != nil {
						t.Fatalf("step %d: Leave(%s): %v", i, s.leave, err)
					}
					continue
				}
				s.req.Pod, s.req.Port = "pod-"+s.req.Key, "port-"+s.req.Key
				ln, role, err := st.Join("ns", "l", dir, s.req)
				var ce *ConflictError
				switch {
				case s.conflict != "":
					if !errors.As(err, &ce) || ce.Field != s.conflict {
						t.Fatalf("step %d: Join(%+v) = %q, %v; want a conflict on field %q", i, s.req, role, err, s.conflict)
					}
					continue
				case err != nil:
					t.Fatalf("step %d: Join(%+v): %v", i, s.req, err)
				case role != s.role:
					t.Fatalf("step %d: Join(%+v) gave role %q, want %q", i, s.req, role, s.role)
				}
				if len(ln.Secret) != 22 {
					t.Fatalf("step %d: secret %q, want 22 hex digits", i, ln.Secret)
				}
				if len(ln.Members) > 1 && ln.Secret != secret {
					t.Fatalf("step %d: secret %q, but the pod already there got %q", i, ln.Secret, secret)
				}
				secret = ln.Secret
				if err := dir.Check("ns", "l", ln.Mount); err != nil {
					t.Fatalf("step %d: the record names another directory: %v", i, err)
				}
			}
			ln, ok, err := st.ReadLink("ns", "l")
			if err != nil || !ok || len(ln.Members) != tc.members {
				t.Fatalf("link record %+v (found %v, %v); want %d members", ln, ok, err, tc.members)
			}
			roles := map[string]bool{}
			for _, m := range ln.Members {
				if roles[m.Role] {
					t.Fatalf("two members are %s: %+v", m.Role, ln.Members)
				}
				roles[m.Role] = true
			}
			// Everyone leaves: record, lock and directory go.
			for _, m := range ln.Members {
				if err := st.Leave("ns", "l", dir, m.Key); err != nil {
					t.Fatal(err)
				}
			}
			if _, ok, _ := st.ReadLink("ns", "l"); ok {
				t.Error("link record left after the last member left")
			}
			if len(dir.dirs) != 0 || dir.made != dir.removed {
				t.Errorf("link dirs left after the last member left: %v (made %d, removed %d)", dir.dirs, dir.made, dir.removed)
			}
		})
	}
}

// TestJoinAfterReboot: a link record from an earlier boot (its mount and its pods are gone) does
// not block the link: the next pod starts it afresh with a new directory.
func TestJoinAfterReboot(t *testing.T) {
	root := t.TempDir()
	dir := &fakeDirs{dirs: map[string]safefs.Identity{}}
	before := Store{Dir: filepath.Join(root, "state"), Boot: "boot-1"}
	for _, k := range []string{"a", "b"} {
		if _, _, err := before.Join("ns", "l", dir, JoinRequest{Key: k, Mode: "ethernet"}); err != nil {
			t.Fatal(err)
		}
	}
	delete(dir.dirs, "ns/l") // the reboot took the mount
	after := Store{Dir: before.Dir, Boot: "boot-2"}
	ln, role, err := after.Join("ns", "l", dir, JoinRequest{Key: "c", Mode: "ethernet"})
	if err != nil || role != "server" || len(ln.Members) != 1 || ln.Boot != "boot-2" || dir.made != 2 {
		t.Fatalf("join after reboot: %+v %q %v (made %d)", ln, role, err, dir.made)
	}
}
