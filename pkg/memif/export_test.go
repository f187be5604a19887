package memif

import "time"

// SetStatusInterval makes ports opened from now on rewrite their status file every d, until the
// returned function restores the default.
func SetStatusInterval(d time.Duration) (restore func()) {
	old := statusInterval.Swap(int64(d))
	return func() { statusInterval.Store(old) }
}
