package ledger

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestJournalSurvivesReopen(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s", "state")
	ids := []string{"a", "b", "c"}
	l, reason := Open(p, ids)
	if reason == "" || len(l.DirtyIDs()) != 3 {
		t.Fatalf("fresh ledger: %q %v", reason, l.DirtyIDs())
	}
	for _, id := range ids {
		l.Clean(id, time.Time{})
	}
	if err := l.Save(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(100, 5)
	if err := l.Allocated([]string{"b", "c"}, t0); err != nil {
		t.Fatal(err)
	}
	l.Clean("c", t0) // scrubbed after its allocation
	l.Clean("b", time.Unix(50, 0))
	if err := l.Save(); err != nil {
		t.Fatal(err)
	}
	if err := l.Allocated([]string{"a"}, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}

	l2, reason := Open(p, ids)
	if reason != "" {
		t.Fatal(reason)
	}
	got := l2.DirtyIDs()
	if len(got) != 2 || !got["b"].AllocatedAt.Equal(t0) || !got["a"].AllocatedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("reopened: %v", got)
	}

	if err := os.WriteFile(p, []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l3, reason := Open(p, ids)
	if reason == "" || len(l3.DirtyIDs()) != 3 {
		t.Fatalf("corrupt file: %q %v", reason, l3.DirtyIDs())
	}
}
