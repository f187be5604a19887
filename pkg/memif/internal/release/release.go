// Package release has a store-release of a 32-bit word, for the one place in the data path where
// sync/atomic's sequentially consistent store costs more than the ordering it needs: a queue's
// guard going back to idle at the end of every burst (pkg/memif queue.go).
//
// On amd64 sync/atomic's Store is an XCHG, a locked instruction that also orders the store before
// every later load. Giving a lock back needs less: that the writes made while holding it are
// visible before the word says it is free. x86-TSO never reorders a store with earlier loads or
// stores, so a plain MOV is that store-release, as a spinlock's unlock is in C. Elsewhere, and
// under the race detector (which must see the store to know what it publishes), Store32 is
// sync/atomic's Store.
package release
