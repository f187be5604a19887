package traffic

import (
	"strings"
	"testing"
)

// fakeClock is a counter that moves only when the test says so.
type fakeClock struct{ now uint64 }

func (c *fakeClock) read() uint64     { return c.now }
func (c *fakeClock) advance(d uint64) { c.now += d }

// TestBusyMeterCountsPollsThatMovedPackets plays a loop as runRx and runFwd drive the meter: a
// poll's cycles are busy when it moved packets, whatever it cost, and idle otherwise; the time
// between polls (pausing, asleep, descheduled) is idle too; the total runs from the meter's
// creation to store.
func TestBusyMeterCountsPollsThatMovedPackets(t *testing.T) {
	clk := &fakeClock{now: 1000}
	m := newBusyMeter(clk.read)
	poll := func(cost uint64, moved int) {
		t0 := m.start()
		clk.advance(cost)
		m.end(t0, moved)
	}
	poll(100, 32) // busy
	poll(7, 0)    // an empty poll
	clk.advance(50)
	poll(40, 1) // busy
	// Two streams in one turn (runFwd): the second starts where the first ended.
	t0 := m.start()
	clk.advance(30)
	t1 := m.end(t0, 0) // the first direction found nothing
	clk.advance(60)
	m.end(t1, 5) // the second moved 5
	clk.advance(13)
	var c Counters
	m.store(&c)
	if got, want := c.BusyCycles.Load(), uint64(100+40+60); got != want {
		t.Errorf("busy cycles %d, want %d", got, want)
	}
	if got, want := c.LoopCycles.Load(), uint64(100+7+50+40+30+60+13); got != want {
		t.Errorf("loop cycles %d, want %d", got, want)
	}
}

// TestCycleFields: cycles per received packet and the idle share, as the summary prints them.
func TestCycleFields(t *testing.T) {
	for _, tc := range []struct {
		t    Totals
		want string
	}{
		{Totals{RxPkts: 1000, BusyCycles: 128000, LoopCycles: 512000}, " busy_cycles_per_pkt=128.0 idle_share=0.750 tsc_mhz=2100"},
		{Totals{RxPkts: 3, BusyCycles: 100, LoopCycles: 100}, " busy_cycles_per_pkt=33.3 idle_share=0.000 tsc_mhz=2100"},
		{Totals{RxPkts: 0, BusyCycles: 0, LoopCycles: 5000}, " busy_cycles_per_pkt=NA idle_share=1.000 tsc_mhz=2100"},
		{Totals{}, " busy_cycles_per_pkt=NA idle_share=NA tsc_mhz=2100"}, // a run that never started
	} {
		if got := cycleFields(tc.t, 2100); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.t, got, tc.want)
		}
	}
	for _, m := range []Mode{ModeRx, ModeEcho, ModeFwd} {
		if !(Config{Mode: m}).meters() {
			t.Errorf("mode %s does not count busy cycles", m)
		}
	}
	for _, m := range []Mode{ModeTx, ModeTxRx, ModePing} {
		if (Config{Mode: m}).meters() {
			t.Errorf("mode %s counts busy cycles", m)
		}
	}
	if (Config{Mode: ModeFwd, NoCycles: true}).meters() {
		t.Error("--record-cycles=false counts busy cycles")
	}
	if !strings.HasPrefix(cycleFields(Totals{}, 0), " busy_cycles_per_pkt=") {
		t.Error("the fields must start with a space: they follow the summary's others")
	}
}
