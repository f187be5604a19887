package metricsauth

import (
	"sync"
	"time"
)

// cache holds decisions by the SHA-256 of their token until they expire, at most max of them.
type cache struct {
	mu      sync.Mutex
	max     int
	now     func() time.Time
	entries map[[32]byte]entry
}

type entry struct {
	d       decision
	expires time.Time
}

func newCache(max int, now func() time.Time) *cache {
	return &cache{max: max, now: now, entries: map[[32]byte]entry{}}
}

func (c *cache) get(key [32]byte) (decision, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !c.now().Before(e.expires) {
		delete(c.entries, key)
		return decision{}, false
	}
	return e.d, true
}

// put keeps d for ttl. A full cache first drops what expired, then (a flood of distinct tokens)
// any one entry: the bound holds whatever callers send, and a dropped decision costs only a
// review.
func (c *cache) put(key [32]byte, d decision, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= c.max {
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
		for k := range c.entries {
			if len(c.entries) < c.max {
				break
			}
			delete(c.entries, k)
		}
	}
	c.entries[key] = entry{d: d, expires: now.Add(ttl)}
}

func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
