package pools

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/device"
)

// A unit is withheld when its scrub unlinked the old file but found no pages for the new one:
// a previous tenant (or whoever it passed the descriptor to) still holds the old file, so its
// hugepages did not come back, and the pool's mount (the pool and one unit of headroom, which
// another held unit took already) has no room. The unit stays out of
// service (Check reports it, both backends keep it from the next tenant) while every other unit
// keeps its own pages, and a later Scrub makes it again once the pages are back.

// retryInterval bounds how often a withheld unit is tried again when the mount cannot say
// whether its pages are back (a mount without a size, made by an older agent).
const retryInterval = time.Second

// withheld is what the pool knows of a withheld unit.
type withheld struct {
	ino     uint64 // the old file's inode, 0 when unknown (the file was gone before the scrub)
	since   time.Time
	holders []string
	lastTry time.Time
	err     error
}

func newWithheld(id string, old *unix.Stat_t, now time.Time) *withheld {
	w := &withheld{since: now, lastTry: now}
	what := "its old file"
	if old != nil {
		w.ino = old.Ino
		w.holders = findHolders("/proc", old.Dev, old.Ino)
		what = fmt.Sprintf("its old file (inode %d)", old.Ino)
	}
	by := "by no process this agent can see (one in another PID namespace, or a descriptor in flight in a socket)"
	if len(w.holders) > 0 {
		by = "by " + strings.Join(w.holders, ", ")
	}
	w.err = fmt.Errorf("unit %s withheld: %w: the hugepages of %s are still held %s; the unit comes back once they are let go",
		id, device.ErrWithheld, what, by)
	return w
}

// noPages reports an error of running out of hugepages: the mount's size, the node's pages, or
// the agent's hugetlb cgroup limit.
func noPages(err error) bool { return errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.ENOMEM) }

// Withheld returns the withheld units and why each is withheld.
func (p *Provider) Withheld() map[string]error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	out := make(map[string]error, len(p.withheld))
	for id, w := range p.withheld {
		out[id] = w.err
	}
	return out
}

func (p *Provider) withheldUnit(id string) *withheld {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	return p.withheld[id]
}

// withhold records id as withheld after a failed create; old is the file the scrub removed.
func (p *Provider) withhold(id string, old *unix.Stat_t) error {
	w := newWithheld(id, old, time.Now())
	p.wmu.Lock()
	p.withheld[id] = w
	p.wmu.Unlock()
	p.log.Warn("pool unit withheld: a previous tenant still holds its old file", "unit", id,
		"inode", w.ino, "holders", w.holders, "err", w.err)
	return w.err
}

// refillLocked makes a withheld unit again when its pages may be back: cheaply refused while
// the pool's mount shows fewer free pages than a unit needs. The caller holds p.mu.
func (p *Provider) refillLocked(id string, node int, w *withheld) error {
	free, known := p.freeBytes()
	now := time.Now()
	if known && free < p.pool.UnitSize.Bytes {
		return w.err
	}
	if !known && now.Sub(w.lastTry) < retryInterval {
		return w.err
	}
	w.lastTry = now
	if err := p.create(id, node); err != nil {
		if noPages(err) {
			return w.err
		}
		return fmt.Errorf("refill %s: %w", id, err)
	}
	p.wmu.Lock()
	delete(p.withheld, id)
	p.wmu.Unlock()
	p.log.Info("pool unit refilled: its previous tenant let go", "unit", id, "withheldFor", now.Sub(w.since).Round(time.Millisecond).String())
	return nil
}

// freeBytes is what the pool's mount can still hold, when its size bounds it.
func (p *Provider) freeBytes() (int64, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(p.dir, &st); err != nil || st.Type != unix.HUGETLBFS_MAGIC || !bounded(st) {
		return 0, false
	}
	return int64(st.Bfree) * st.Bsize, true
}

// bounded reports whether a hugetlbfs mount has a size (statfs shows -1 blocks without one).
func bounded(st unix.Statfs_t) bool { return st.Blocks > 0 && st.Blocks < 1<<62 }

// orphanBytes is the memory the pool's mount holds beyond its files: pages of unlinked files
// that something still holds. Zero when the mount cannot tell (no size).
func (p *Provider) orphanBytes() int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(p.dir, &st); err != nil || !bounded(st) {
		return 0
	}
	used := int64(st.Blocks-st.Bfree) * st.Bsize
	ents, err := os.ReadDir(p.dir)
	if err != nil {
		return 0
	}
	for _, e := range ents {
		var fst unix.Stat_t
		if unix.Lstat(p.dir+"/"+e.Name(), &fst) == nil {
			used -= fst.Blocks * 512
		}
	}
	return max(used, 0)
}
