// Package ledger remembers which devices were handed out and not yet
// scrubbed, across plugin restarts. A device that is not in the ledger is
// clean; one that is may be in use by a pod and must be scrubbed before it
// is handed out again.
//
// The file is an append-only journal, so that Allocate pays for one small
// write instead of rewriting the whole state: lines "a <unix-nanos> <id>..."
// (allocated) and "c <id>..." (clean). Save compacts it to one "a" line per
// dirty device.
package ledger

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/memifnet/memifnet/internal/safefs"
)

// Entry is one dirty device.
type Entry struct {
	// AllocatedAt is when the device was last handed out; zero when not
	// known (first start, or a lost state file).
	AllocatedAt time.Time
}

// Ledger is safe for concurrent use.
type Ledger struct {
	mu      sync.Mutex
	path    string
	dirty   map[string]Entry
	journal *os.File
	lines   int
}

// Open loads the ledger at path. Without a readable file every device in
// ids counts as dirty: a plugin that lost its memory must not hand out a
// slot that a running pod may still hold without scrubbing it first, and
// must not scrub it while the pod may use it. The reason is empty when the
// file was loaded, else it says why every device counts as dirty.
func Open(path string, ids []string) (l *Ledger, reason string) {
	l = &Ledger{path: path, dirty: map[string]Entry{}}
	known := map[string]bool{}
	for _, id := range ids {
		known[id] = true
	}
	err := l.replay(known)
	if err != nil {
		l.dirty = map[string]Entry{}
		for _, id := range ids {
			l.dirty[id] = Entry{}
		}
		if errors.Is(err, fs.ErrNotExist) {
			return l, "no state file " + path + ", all devices count as dirty"
		}
		return l, fmt.Sprintf("state file %s unreadable, all devices count as dirty: %v", path, err)
	}
	return l, ""
}

func (l *Ledger) replay(known map[string]bool) error {
	f, err := os.Open(l.path)
	if err != nil {
		return err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 16<<20)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) == 0 {
			continue
		}
		switch {
		case fields[0] == "a" && len(fields) >= 2:
			ns, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return fmt.Errorf("line %q: %w", s.Text(), err)
			}
			for _, id := range fields[2:] {
				if known[id] {
					l.dirty[id] = Entry{AllocatedAt: unixNano(ns)}
				}
			}
		case fields[0] == "c":
			for _, id := range fields[1:] {
				delete(l.dirty, id)
			}
		default:
			return fmt.Errorf("bad line %q", s.Text())
		}
	}
	return s.Err()
}

func unixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// Dirty says whether id needs a scrub before it is handed out.
func (l *Ledger) Dirty(id string) (Entry, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.dirty[id]
	return e, ok
}

// DirtyIDs lists the dirty devices.
func (l *Ledger) DirtyIDs() map[string]Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]Entry, len(l.dirty))
	for id, e := range l.dirty {
		out[id] = e
	}
	return out
}

// Allocated marks ids as handed out at t and journals it.
func (l *Ledger) Allocated(ids []string, t time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		l.dirty[id] = Entry{AllocatedAt: t}
	}
	if err := l.appendLocked("a " + strconv.FormatInt(nanos(t), 10) + " " + strings.Join(ids, " ")); err != nil {
		return err
	}
	if l.lines > maxJournal {
		return l.saveLocked()
	}
	return nil
}

// Clean marks id scrubbed, unless it was handed out again after since
// (then the scrub raced with an Allocate and the device is in use). It is
// journalled by the next Save.
func (l *Ledger) Clean(id string, since time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.dirty[id]; ok && e.AllocatedAt.After(since) {
		return
	}
	delete(l.dirty, id)
}

// Save rewrites the journal as a snapshot (an atomic replace).
func (l *Ledger) Save() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.saveLocked()
}

// maxJournal bounds the journal when nothing reclaims (no PodResources).
const maxJournal = 10000

func (l *Ledger) saveLocked() error {
	byTime := map[int64][]string{}
	for id, e := range l.dirty {
		byTime[nanos(e.AllocatedAt)] = append(byTime[nanos(e.AllocatedAt)], id)
	}
	var b strings.Builder
	times := make([]int64, 0, len(byTime))
	for ts := range byTime {
		times = append(times, ts)
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	for _, ts := range times {
		ids := byTime[ts]
		sort.Strings(ids)
		fmt.Fprintf(&b, "a %d %s\n", ts, strings.Join(ids, " "))
	}
	// Durable: a ledger lost in a crash would make every device count as dirty, which is safe
	// but scrubs everything; one half-written would be worse.
	if err := safefs.WriteFile(l.path, []byte(b.String()), 0o644, safefs.WriteOptions{Durable: true}); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	if l.journal != nil {
		l.journal.Close()
		l.journal = nil
	}
	l.lines = len(times)
	return nil
}

func (l *Ledger) appendLocked(line string) error {
	if l.journal == nil {
		if err := os.MkdirAll(filepath.Dir(l.path), 0o755); err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		l.journal = f
	}
	if _, err := l.journal.WriteString(line + "\n"); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	l.lines++
	return nil
}
