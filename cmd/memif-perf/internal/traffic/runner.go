package traffic

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memifnet/memifnet/cmd/memif-perf/internal/tsc"
	"github.com/memifnet/memifnet/cmd/memif-perf/internal/verify"
	"github.com/memifnet/memifnet/pkg/memif"
)

// Runner drives the loops over one interface, or two (fwd, and txrx as a chain generator).
type Runner struct {
	cfg   Config
	ports []*memif.Interface
	ctr   []Counters
	stop  atomic.Bool
	ctx   context.Context // ends with the run: wakes receivers asleep in interrupt mode
	hist  []*Histogram    // ping: one per queue
	clock func() uint64   // what busy cycles are counted in: tsc.Read
	mhz   float64         // the clock's rate over the run, set when Run returns

	errMu    sync.Mutex
	firstErr []string // the first few verification failures, for the report
}

// maxReportedErrors bounds the verification failures kept word for word.
const maxReportedErrors = 5

// New checks cfg and prepares a Runner for the ports: one, or two for ModeFwd (forward between
// them) and ModeTxRx (send on the first, receive on the second).
func New(ports []*memif.Interface, cfg Config) (*Runner, error) {
	if err := checkPorts(cfg.Mode, len(ports)); err != nil {
		return nil, err
	}
	queues := memif.MaxQueues
	for _, p := range ports {
		ic := p.Config()
		queues = min(queues, ic.RxQueues, ic.TxQueues)
	}
	if cfg.Queues <= 0 {
		cfg.Queues = queues
	}
	if cfg.Queues > queues {
		return nil, fmt.Errorf("traffic: %d queues, but the interfaces have %d queue pairs", cfg.Queues, queues)
	}
	if cfg.Burst <= 0 {
		return nil, fmt.Errorf("traffic: burst %d: must be positive", cfg.Burst)
	}
	if cfg.Mode == ModeFwd && (cfg.Verify || (cfg.RxMode != "" && cfg.RxMode != RxPoll)) {
		return nil, fmt.Errorf("traffic: mode fwd polls and never looks at payloads: verify at the receiver, poll here")
	}
	minSize := verify.EthHeaderLen
	if cfg.Verify || cfg.Mode == ModePing {
		minSize = verify.MinFrame
	}
	if cfg.Size < minSize {
		return nil, fmt.Errorf("traffic: size %d: at least %d bytes in mode %s", cfg.Size, minSize, cfg.Mode)
	}
	if cfg.MaxFrame == 0 {
		cfg.MaxFrame = max(cfg.Size, 2048)
	}
	cfg.Window = window(cfg, ports)
	if cfg.PingTimeout <= 0 {
		cfg.PingTimeout = time.Second
	}
	if cfg.RxMode == "" {
		cfg.RxMode = RxPoll
	}
	if cfg.Spins <= 0 {
		cfg.Spins = 1000
	}
	r := &Runner{cfg: cfg, ports: ports, ctr: make([]Counters, cfg.Queues), clock: tsc.Read}
	if cfg.NoCycles {
		r.clock = noClock
	}
	if cfg.Mode == ModePing {
		r.hist = make([]*Histogram, cfg.Queues)
		for q := range r.hist {
			r.hist[q] = NewHistogram()
		}
	}
	return r, nil
}

// checkPorts says whether mode runs over n ports.
func checkPorts(mode Mode, n int) error {
	switch {
	case n < 1 || n > 2:
		return fmt.Errorf("traffic: %d ports: one or two", n)
	case mode == ModeFwd && n != 2:
		return fmt.Errorf("traffic: mode fwd needs two ports")
	case n == 2 && mode != ModeFwd && mode != ModeTxRx:
		return fmt.Errorf("traffic: mode %s uses one port; two ports are for fwd and txrx", mode)
	}
	return nil
}

// window is how many packets a txrx queue keeps in flight (Config.Window): by default half the
// receiving ring, so that an echoing peer whose transmit ring is no larger than ours, or a
// forwarder in front of it, never finds the ring full: testpmd's io forwarding drops what it
// cannot send, and the client re-arms its receive ring in batches (up to 31 slots unarmed).
func window(cfg Config, ports []*memif.Interface) int {
	if cfg.Window != 0 {
		return cfg.Window
	}
	ic := ports[len(ports)-1].Config()
	segs := (cfg.Size + ic.BufferSize - 1) / ic.BufferSize
	return max(1, ic.RingSize/segs/2)
}

// Run starts one goroutine per queue and returns when ctx ends and every loop has stopped.
func (r *Runner) Run(ctx context.Context) {
	r.ctx = ctx
	span := tsc.Start()
	defer func() { r.mhz = span.MHz() }()
	var wg sync.WaitGroup
	for q := range r.cfg.Queues {
		wg.Go(func() {
			// One thread per queue, like a DPDK lcore: the poller never migrates between threads.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			r.loop(q)
		})
	}
	<-ctx.Done()
	r.stop.Store(true)
	wg.Wait()
}

// ClockMHz is the rate of the clock busy cycles are counted in (the TSC's), measured over the run:
// what testpmd prints as "at N MHz Clock". Call it once Run has returned.
func (r *Runner) ClockMHz() float64 { return r.mhz }

// Totals reads the counters now (safe while running).
func (r *Runner) Totals() Totals {
	var t Totals
	for q := range r.ctr {
		c := &r.ctr[q]
		t.RxPkts += c.RxPkts.Load()
		t.RxBytes += c.RxBytes.Load()
		t.TxPkts += c.TxPkts.Load()
		t.TxBytes += c.TxBytes.Load()
		t.Corrupt += c.Corrupt.Load()
		t.Lost += c.Lost.Load()
		t.Late += c.Late.Load()
		t.WrittenOff += c.WrittenOff.Load()
		t.Polls += c.Polls.Load()
		t.IdlePolls += c.IdlePolls.Load()
		t.TxFull += c.TxFull.Load()
		t.BusyCycles += c.BusyCycles.Load()
		t.LoopCycles += c.LoopCycles.Load()
	}
	for _, p := range r.ports {
		ic := p.Config()
		for q := range ic.RxQueues {
			s := p.RxQueue(q).Stats()
			t.Drops += s.Drops
			if r.cfg.forwards() { // the library counts what Forward moves
				t.RxBytes += s.Bytes
			}
		}
		for q := range ic.TxQueues {
			s := p.TxQueue(q).Stats()
			t.Drops += s.Drops
			if r.cfg.forwards() {
				t.TxBytes += s.Bytes
			}
		}
	}
	return t
}

// Errors returns the first verification failures, word for word.
func (r *Runner) Errors() []string {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return append([]string(nil), r.firstErr...)
}

// RTT merges the ping round-trip histograms of all queues (nil unless mode ping).
func (r *Runner) RTT() *Histogram {
	if r.hist == nil {
		return nil
	}
	h := NewHistogram()
	for _, q := range r.hist {
		h.Merge(q)
	}
	return h
}

func (r *Runner) noteError(err error) {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	if len(r.firstErr) < maxReportedErrors {
		r.firstErr = append(r.firstErr, err.Error())
	}
}
