package dpdkpeer

import (
	"regexp"
	"strconv"
)

// Stats are the port counters of one of testpmd's periodic "NIC statistics" blocks.
type Stats struct {
	RxPkts, RxBytes, TxPkts, TxBytes uint64
}

// How testpmd (--stats-period 1, non-interactive) prints one block, about every 2 s on a small VM
// (it sleeps 1 s and then finds the period just not over):
//
//	RX-packets: N  RX-missed: N  RX-bytes: N
//	TX-packets: N  TX-errors: N  TX-bytes: N
//	Rx-pps: N  Rx-bps: N
//	Tx-pps: N  Tx-bps: N
var (
	rxLine = regexp.MustCompile(`RX-packets:\s*(\d+)\s+RX-missed:\s*\d+\s+RX-bytes:\s*(\d+)`)
	txLine = regexp.MustCompile(`TX-packets:\s*(\d+)\s+TX-errors:\s*\d+\s+TX-bytes:\s*(\d+)`)
	rxRate = regexp.MustCompile(`Rx-pps:\s*(\d+)`)
	txRate = regexp.MustCompile(`Tx-pps:\s*(\d+)`)
)

func u64(s string) uint64 { n, _ := strconv.ParseUint(s, 10, 64); return n }

// statsParser follows testpmd's output line by line. net_memif's counters cover only the
// current connection (they read zero after a disconnect, and the end-of-run summary shows
// wrapped values), so the largest ones seen are kept next to the latest.
type statsParser struct {
	pendingRx Stats // the RX line of the block being read
	latest    Stats // the last complete block
	max       Stats
	rx, tx    []float64 // per-block Rx-pps and Tx-pps
}

func (s *statsParser) line(l string) {
	if m := rxLine.FindStringSubmatch(l); m != nil {
		s.pendingRx = Stats{RxPkts: u64(m[1]), RxBytes: u64(m[2])}
		return
	}
	if m := txLine.FindStringSubmatch(l); m != nil {
		s.latest = s.pendingRx
		s.latest.TxPkts, s.latest.TxBytes = u64(m[1]), u64(m[2])
		s.max.RxPkts = max(s.max.RxPkts, s.latest.RxPkts)
		s.max.RxBytes = max(s.max.RxBytes, s.latest.RxBytes)
		s.max.TxPkts = max(s.max.TxPkts, s.latest.TxPkts)
		s.max.TxBytes = max(s.max.TxBytes, s.latest.TxBytes)
		return
	}
	if m := rxRate.FindStringSubmatch(l); m != nil {
		s.rx = append(s.rx, float64(u64(m[1])))
		return
	}
	if m := txRate.FindStringSubmatch(l); m != nil {
		s.tx = append(s.tx, float64(u64(m[1])))
	}
}

// rates are the mean Rx and Tx packet rates (Mpps) over the active window (the first to the last
// block with traffic), without its first and last block, which cover partial seconds; samples is
// how many blocks were averaged.
func (s *statsParser) rates() (rxMpps, txMpps float64, samples int) {
	n := min(len(s.rx), len(s.tx))
	first, last := -1, -1
	for i := range n {
		if s.rx[i]+s.tx[i] > 0 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return 0, 0, 0
	}
	if last-first+1 >= 3 {
		first, last = first+1, last-1
	}
	var sr, st float64
	for i := first; i <= last; i++ {
		sr, st = sr+s.rx[i], st+s.tx[i]
	}
	samples = last - first + 1
	return sr / float64(samples) / 1e6, st / float64(samples) / 1e6, samples
}
