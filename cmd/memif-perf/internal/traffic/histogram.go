package traffic

import "time"

// Histogram records durations in 10 ns steps up to 1 ms (enough resolution for memif round
// trips of a few microseconds, and fixed memory so recording never allocates); longer ones
// land in one overflow bucket, reported as the longest of them.
type Histogram struct {
	buckets     []uint64
	overflow    uint64
	overflowMax time.Duration // the longest sample in the overflow bucket
	count       uint64
}

const (
	histStep    = 10 * time.Nanosecond
	histBuckets = int(time.Millisecond / histStep)
)

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram { return &Histogram{buckets: make([]uint64, histBuckets)} }

// Add records one sample.
func (h *Histogram) Add(d time.Duration) {
	h.count++
	if k := int(d / histStep); k >= 0 && k < histBuckets {
		h.buckets[k]++
		return
	}
	h.overflow++
	h.overflowMax = max(h.overflowMax, d)
}

// Merge adds o's samples to h.
func (h *Histogram) Merge(o *Histogram) {
	for k, n := range o.buckets {
		h.buckets[k] += n
	}
	h.overflow += o.overflow
	h.overflowMax = max(h.overflowMax, o.overflowMax)
	h.count += o.count
}

// Count is the number of samples.
func (h *Histogram) Count() uint64 { return h.count }

// Quantile returns the smallest recorded duration d such that at least q of the samples are <= d
// (to the bucket's upper edge); 0 without samples.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.count == 0 {
		return 0
	}
	rank := uint64(q*float64(h.count) + 0.999999)
	rank = max(rank, 1)
	var seen uint64
	for k, n := range h.buckets {
		seen += n
		if seen >= rank {
			return time.Duration(k+1) * histStep
		}
	}
	return h.overflowMax
}
