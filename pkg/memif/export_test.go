package memif

import "time"

// SetStatusInterval makes ports opened from now on rewrite their status file every d, until the
// returned function restores the default.
func SetStatusInterval(d time.Duration) (restore func()) {
	old := statusInterval.Swap(int64(d))
	return func() { statusInterval.Store(old) }
}

// ForwardDescs is the ideal forwarder between two server queues, for BenchmarkForwardCrossCore's
// ceiling: it moves descriptors and nothing else. Each packet's length goes from q's ring into
// tx's next armed slot, no payload byte is read or written (what arrives is the armed buffer's
// old content), and what tx has no room for is dropped. Single-buffer packets only; never use it
// for anything but that measurement.
func (q *RxQueue) ForwardDescs(tx *TxQueue, max int) int {
	if q.path != &rxServer || tx.path != &txServer || !q.acquire() {
		return 0
	}
	avail := min(q.available(), uint16(max))
	if avail == 0 || !tx.acquire() {
		q.release()
		return 0
	}
	free := min(tx.peer.Load()-tx.cursor, uint16(tx.ring.Size()))
	n := min(avail, free)
	for k := range n {
		d := tx.ring.At(tx.cursor + k)
		d.Flags, d.Length = 0, min(q.ring.At(q.cursor+k).Length, d.Length)
	}
	start := q.cursor
	q.cursor += avail
	q.handBack(start)
	tx.publish(tx.cursor+n, int(n), 0)
	tx.release()
	q.release()
	return int(n)
}
