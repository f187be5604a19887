package traffic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/memifnet/memifnet/pkg/memif"
)

// Exit codes of a session.
const (
	ExitOK      = 0
	ExitFailed  = 1 // verification failed, or nothing received where something had to be
	ExitUsage   = 2
	ExitNoLink  = 3 // the link never came up in time
	ExitRefused = 4 // the peer refused the handshake (wrong secret, unknown id, ...)
)

// Session is one memif-perf run: open the interfaces, wait for the links, run the loops for the
// duration, report.
type Session struct {
	// Ports are the interfaces: one, or two for fwd and a two-port txrx.
	Ports []memif.Config
	// PeersTrustEachOther (fwd) gives the two ports, zero-copy clients both, one buffer pool, so
	// forwarding between them copies nothing; each port's peer then maps the other's frames.
	// Without it each has its own pool and forwarding copies each frame once.
	PeersTrustEachOther bool
	Traffic             Config
	Duration            time.Duration // from link up; 0 = until ctx ends
	ConnectTimeout      time.Duration
	// Metrics, when set, is the address where the ports' Prometheus metrics are served
	// (http://Metrics/metrics) for the whole run.
	Metrics        string
	Stdout, Stderr io.Writer
}

// Run returns the process exit code. The final line on Stdout is always the machine-readable
// summary; progress and diagnostics go to Stderr.
func (s *Session) Run(ctx context.Context) int {
	ports, closeAll, err := s.open()
	if err != nil {
		fmt.Fprintf(s.Stderr, "memif-perf: %v\n", err)
		s.summary(Totals{}, 0, nil, 0)
		return ExitUsage
	}
	defer closeAll()
	if s.Metrics != "" {
		stopMetrics, err := serveMetrics(s.Metrics, ports)
		if err != nil {
			fmt.Fprintf(s.Stderr, "memif-perf: %v\n", err)
			s.summary(Totals{}, 0, nil, 0)
			return ExitUsage
		}
		defer stopMetrics()
	}
	runner, err := New(ports, s.Traffic)
	if err != nil {
		fmt.Fprintf(s.Stderr, "memif-perf: %v\n", err)
		s.summary(Totals{}, 0, nil, 0)
		return ExitUsage
	}
	if code := s.waitUp(ctx, ports); code != ExitOK {
		s.summary(Totals{}, 0, nil, 0)
		return code
	}

	runCtx, stop := ctx, context.CancelFunc(func() {})
	if s.Duration > 0 {
		runCtx, stop = context.WithTimeout(ctx, s.Duration)
	}
	defer stop()
	start := time.Now()
	done := make(chan struct{})
	go func() {
		runner.Run(runCtx)
		close(done)
	}()
	s.progress(runner, start, done)
	elapsed := time.Since(start)

	t := runner.Totals()
	for _, e := range runner.Errors() {
		fmt.Fprintf(s.Stderr, "memif-perf: verify: %s\n", e)
	}
	if s.Traffic.Verify || s.Traffic.Mode == ModePing {
		fmt.Fprintf(s.Stderr, "memif-perf: corrupt=%d lost=%d late=%d\n", t.Corrupt, t.Lost, t.Late)
	}
	if t.WrittenOff > 0 {
		fmt.Fprintf(s.Stderr, "memif-perf: %d packets in flight written off: no reply within %v\n", t.WrittenOff, stallTimeout)
	}
	if t.Polls > 0 {
		fmt.Fprintf(s.Stderr, "memif-perf: polls=%d idle_polls=%d (%.1f %%) tx_full=%d (%.1f %%)\n",
			t.Polls, t.IdlePolls, 100*float64(t.IdlePolls)/float64(t.Polls), t.TxFull, 100*float64(t.TxFull)/float64(t.Polls))
	}
	s.summary(t, elapsed, runner.RTT(), runner.ClockMHz())

	switch {
	case !s.Traffic.Verify:
		return ExitOK
	case t.VerifyErrors() != 0:
		return ExitFailed
	case s.Traffic.Mode != ModeTx && t.RxPkts == 0:
		// A verified run that received nothing proved nothing.
		fmt.Fprintf(s.Stderr, "memif-perf: --verify: no packet received\n")
		return ExitFailed
	}
	return ExitOK
}

// notYet is the refusal of a server whose socket is there before the interface is: DPDK binds
// its listener at probe but refuses clients until port start, VPP creates the socket before the
// interface. The client is retrying anyway; the wait goes on until the connect timeout.
const notYet = "ID not found"

// waitLink waits for one port's link, through refusals that say the server is still starting.
func (s *Session) waitLink(ctx context.Context, iface *memif.Interface) error {
	told := false
	for {
		changed := iface.Changed()
		err := iface.WaitUp(ctx)
		var pe *memif.PeerError
		if !errors.As(err, &pe) || pe.Reason != notYet {
			return err
		}
		if !told {
			fmt.Fprintf(s.Stderr, "memif-perf: the server says %q: waiting for it to create the interface\n", pe.Reason)
			told = true
		}
		select {
		case <-ctx.Done():
			return err
		case <-changed: // the next attempt's outcome
		}
	}
}

// open opens the ports, with one pool shared by two zero-copy clients whose peers trust each
// other; closeAll closes them and then the pool.
func (s *Session) open() (ports []*memif.Interface, closeAll func(), err error) {
	cfgs := append([]memif.Config(nil), s.Ports...)
	var pool *memif.Pool
	if s.Traffic.Mode == ModeFwd && s.PeersTrustEachOther {
		if pool, err = sharedPool(cfgs); err != nil {
			return nil, nil, err
		}
		if pool == nil {
			return nil, nil, errors.New("--peers-trust-each-other: the two ports are not zero-copy clients of one buffer size on memory of their own")
		}
		for k := range cfgs {
			cfgs[k].Pool = pool
		}
		fmt.Fprintf(s.Stderr, "memif-perf: both ports are zero-copy clients of one buffer pool (their peers trust each other: each maps the other's frames): forwarding copies nothing\n")
	} else if s.Traffic.Mode == ModeFwd && len(cfgs) == 2 && cfgs[0].ZeroCopy && cfgs[1].ZeroCopy {
		fmt.Fprintf(s.Stderr, "memif-perf: both ports are zero-copy clients with a buffer pool each: forwarding copies each frame once "+
			"(--peers-trust-each-other shares one pool: no copy, but each peer maps the other's frames)\n")
	}
	closeAll = func() {
		for _, p := range ports {
			p.Close()
		}
		if pool != nil {
			pool.Close()
		}
	}
	for k, c := range cfgs {
		p, err := memif.Open(c)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("port %d: %w", k+1, err)
		}
		ports = append(ports, p)
	}
	return ports, closeAll, nil
}

// sharedPool is the pool for two zero-copy client ports of a forwarder, or nil when they are not
// both zero-copy clients of the same buffer size on memory of their own (a pool unit of the
// device plugin, Config.NewRegion, is sized for one interface).
func sharedPool(cfgs []memif.Config) (*memif.Pool, error) {
	if len(cfgs) != 2 {
		return nil, nil
	}
	a, b := cfgs[0], cfgs[1]
	if !a.ZeroCopy || !b.ZeroCopy || a.Role != memif.RoleClient || b.Role != memif.RoleClient ||
		a.NewRegion != nil || b.NewRegion != nil || a.Pool != nil || b.Pool != nil || a.BufferSize != b.BufferSize {
		return nil, nil
	}
	rs := func(c memif.Config) int {
		if c.RingSize == 0 {
			return memif.DefaultRingSize
		}
		return c.RingSize
	}
	bs := a.BufferSize
	if bs == 0 {
		bs = memif.DefaultBufferSize
	}
	// Each port's queue pair holds up to a full receive and a full transmit ring; one ring more
	// for what is between them.
	bufs := 2*(rs(a)+rs(b)) + max(rs(a), rs(b))
	p, err := memif.NewPool(memif.PoolConfig{Name: "memif-perf-fwd", Pairs: max(a.RxQueues, a.TxQueues, b.RxQueues, b.TxQueues, 1),
		Buffers: bufs, BufferSize: bs, Memory: a.Memory, PeersTrustEachOther: true})
	if err != nil {
		return nil, fmt.Errorf("shared pool: %w", err)
	}
	return p, nil
}

// waitUp waits for every port's link and prints it, or says why one did not come up.
func (s *Session) waitUp(ctx context.Context, ports []*memif.Interface) int {
	waitCtx, cancel := context.WithTimeout(ctx, s.ConnectTimeout)
	defer cancel()
	for k, p := range ports {
		name := ""
		if len(ports) > 1 {
			name = fmt.Sprintf(" (port %d)", k+1)
		}
		if err := s.waitLink(waitCtx, p); err != nil {
			var pe *memif.PeerError
			if errors.As(err, &pe) {
				fmt.Fprintf(s.Stderr, "memif-perf: peer refused the connection%s: %s\n", name, pe.Reason)
				return ExitRefused
			}
			fmt.Fprintf(s.Stderr, "memif-perf: link not up after %v%s: %v\n", s.ConnectTimeout, name, err)
			return ExitNoLink
		}
		link, _ := p.Link()
		// The regions say whether a Go client shares a zero-copy pool: 1 in copy mode (rings and
		// buffers), 2 with its pool (region 1), on both ends.
		fmt.Fprintf(s.Stderr, "memif-perf: link up%s: peer %q (%s), %d rx / %d tx queues, ring %d, %d region(s)\n",
			name, link.PeerName, link.PeerApp, link.RxQueues, link.TxQueues, link.RingSize, link.Regions)
	}
	return ExitOK
}

// progress prints one stats line per second until done is closed.
func (s *Session) progress(r *Runner, start time.Time, done <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	prev, prevAt := Totals{}, start
	for {
		select {
		case <-done:
			return
		case now := <-tick.C:
			t := r.Totals()
			dt := now.Sub(prevAt).Seconds()
			fmt.Fprintf(s.Stderr, "[%5.1fs] rx %8.3f Mpps %9.3f Gbit/s | tx %8.3f Mpps %9.3f Gbit/s | rx_pkts=%d tx_pkts=%d drops=%d verify_errors=%d\n",
				now.Sub(start).Seconds(),
				float64(t.RxPkts-prev.RxPkts)/dt/1e6, float64(t.RxBytes-prev.RxBytes)*8/dt/1e9,
				float64(t.TxPkts-prev.TxPkts)/dt/1e6, float64(t.TxBytes-prev.TxBytes)*8/dt/1e9,
				t.RxPkts, t.TxPkts, t.Drops, t.VerifyErrors())
			prev, prevAt = t, now
		}
	}
}

// summary prints the one machine-readable line, with the round-trip quantiles appended in ping
// mode and the busy cycles (cycleFields; mhz is the clock's rate) in rx, echo and fwd.
func (s *Session) summary(t Totals, elapsed time.Duration, rtt *Histogram, mhz float64) {
	mpps := func(n uint64) float64 {
		if elapsed <= 0 {
			return 0
		}
		return float64(n) / elapsed.Seconds() / 1e6
	}
	line := fmt.Sprintf("rx_pkts=%d rx_mpps=%.3f tx_pkts=%d tx_mpps=%.3f drops=%d verify_errors=%d",
		t.RxPkts, mpps(t.RxPkts), t.TxPkts, mpps(t.TxPkts), t.Drops, t.VerifyErrors())
	if s.Traffic.Mode == ModePing {
		if rtt == nil {
			rtt = NewHistogram()
		}
		us := func(q float64) float64 { return float64(rtt.Quantile(q)) / 1e3 }
		line += fmt.Sprintf(" rtt_p50_us=%.2f rtt_p99_us=%.2f rtt_p999_us=%.2f samples=%d", us(0.5), us(0.99), us(0.999), rtt.Count())
	}
	if s.Traffic.meters() {
		line += cycleFields(t, mhz)
	}
	fmt.Fprintln(s.Stdout, line)
}
