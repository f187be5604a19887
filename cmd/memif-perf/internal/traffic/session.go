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
	ExitOK       = 0
	ExitFailed   = 1 // verification failed, or nothing received where something had to be
	ExitUsage    = 2
	ExitNoLink   = 3 // the link never came up in time
	ExitRefused  = 4 // the peer refused the handshake (wrong secret, unknown id, ...)
	ExitInternal = 5
)

// Session is one memif-perf run: open the interface, wait for the link, run the loops for the
// duration, report.
type Session struct {
	Memif          memif.Config
	Traffic        Config
	Duration       time.Duration // from link up; 0 = until ctx ends
	ConnectTimeout time.Duration
	Stdout, Stderr io.Writer
}

// Run returns the process exit code. The final line on Stdout is always the machine-readable
// summary; progress and diagnostics go to Stderr.
func (s *Session) Run(ctx context.Context) int {
	iface, err := memif.Open(s.Memif)
	if err != nil {
		fmt.Fprintf(s.Stderr, "memif-perf: %v\n", err)
		s.summary(Totals{}, 0, nil)
		return ExitUsage
	}
	defer iface.Close()
	runner, err := New(iface, s.Traffic)
	if err != nil {
		fmt.Fprintf(s.Stderr, "memif-perf: %v\n", err)
		s.summary(Totals{}, 0, nil)
		return ExitUsage
	}

	waitCtx, cancel := context.WithTimeout(ctx, s.ConnectTimeout)
	err = s.waitUp(waitCtx, iface)
	cancel()
	if err != nil {
		code := ExitNoLink
		var pe *memif.PeerError
		if errors.As(err, &pe) {
			fmt.Fprintf(s.Stderr, "memif-perf: peer refused the connection: %s\n", pe.Reason)
			code = ExitRefused
		} else {
			fmt.Fprintf(s.Stderr, "memif-perf: link not up after %v: %v\n", s.ConnectTimeout, err)
		}
		s.summary(Totals{}, 0, nil)
		return code
	}
	link, _ := iface.Link()
	// The regions say whether a Go client shares a zero-copy pool: 1 in copy mode (rings and
	// buffers), 2 with its pool (region 1), on both ends.
	fmt.Fprintf(s.Stderr, "memif-perf: link up: peer %q (%s), %d rx / %d tx queues, ring %d, %d region(s)\n",
		link.PeerName, link.PeerApp, link.RxQueues, link.TxQueues, link.RingSize, link.Regions)

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
	s.summary(t, elapsed, runner.RTT())

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

// waitUp waits for the link, through refusals that say the server is still starting.
func (s *Session) waitUp(ctx context.Context, iface *memif.Interface) error {
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
// mode.
func (s *Session) summary(t Totals, elapsed time.Duration, rtt *Histogram) {
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
	fmt.Fprintln(s.Stdout, line)
}
