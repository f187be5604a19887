package traffic

import (
	"testing"
	"time"
)

func TestHistogramQuantiles(t *testing.T) {
	h := NewHistogram()
	for i := 1; i <= 1000; i++ {
		h.Add(time.Duration(i) * time.Microsecond / 10) // 0.1 .. 100 us
	}
	h.Add(3 * time.Millisecond) // overflow
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50_100 * time.Nanosecond}, {0.99, 99_100 * time.Nanosecond}, {1, 3 * time.Millisecond}} {
		got := h.Quantile(c.q)
		if d := got - c.want; d < -20*time.Nanosecond || d > 20*time.Nanosecond {
			t.Errorf("Quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	o := NewHistogram()
	o.Merge(h)
	if o.Count() != 1001 || o.Quantile(1) != 3*time.Millisecond {
		t.Errorf("merged: count %d max %v", o.Count(), o.Quantile(1))
	}
	if NewHistogram().Quantile(0.5) != 0 {
		t.Error("empty histogram: quantile not 0")
	}
}
