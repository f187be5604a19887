package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/memifnet/memifnet/internal/safefs"
)

// SlotClaim says which attachment last wired a slot, and into which of its tmpfs mounts. A pod's
// sandbox can be re-created without a new Allocate (same slot, same tmpfs): the new sandbox's ADD
// takes the claim, so a late DEL of the old sandbox finds the claim gone and leaves the slot to
// its new owner.
type SlotClaim struct {
	Owner   string          `json:"owner"` // attachment key
	Network string          `json:"network"`
	Mount   safefs.Identity `json:"mount"`
}

func (s Store) claimPath(slot string) string {
	return filepath.Join(s.Dir, "slots", slot+".json")
}

// LockSlot serialises the ADDs and DELs that touch one slot.
func (s Store) LockSlot(slot string) (*Lock, error) {
	return lock(filepath.Join(s.Dir, "slots", slot+".lock"))
}

// Claim makes key the owner of slot. Call with the slot's lock held.
func (s Store) Claim(slot string, c SlotClaim) error { return writeJSON(s.claimPath(slot), c) }

// ClaimOf returns the slot's claim; ok is false when nobody claims it.
func (s Store) ClaimOf(slot string) (c SlotClaim, ok bool, err error) {
	ok, err = readJSON(s.claimPath(slot), &c)
	return c, ok, err
}

// Release drops the claim if owner still holds it, and releases the slot's lock l (removing the
// lock file along with the claim, so an unused slot leaves nothing behind).
func (s Store) Release(slot, owner string, l *Lock) error {
	c, ok, err := s.ClaimOf(slot)
	if err != nil || ok && c.Owner != owner {
		l.Unlock()
		return err
	}
	err = os.Remove(s.claimPath(slot))
	l.removeAndUnlock()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("release slot %s: %w", slot, err)
	}
	return nil
}
