package state

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

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
			st := Store{Dir: filepath.Join(root, "state")}
			dir := filepath.Join(root, "links", "ns", "l")
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
				if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o777 {
					t.Fatalf("step %d: link dir %v, %v; want a 0777 directory", i, fi, err)
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
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("link dir left after the last member left: %v", err)
			}
		})
	}
}
