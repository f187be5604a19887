package dpdkpeer

import (
	"strings"
	"time"
)

// What testpmd's log says (DPDK 22.11, --log-level pmd.net.memif:debug).
const (
	portStartedLine = "Checking link statuses" // after every port has started
	connectedLine   = "memif_connect(): Connected"
)

// peerLeft are the lines of a link going down: "Disconnected, id:" (debug level in 22.11), a
// DISCONNECT from the peer, or a server's read of a closed socket (a DPDK client that exits
// sends no DISCONNECT).
var peerLeft = []string{"Disconnected, id:", "Disconnect received", "Invalid message size = 0"}

// exitedByItself is the reason of a testpmd that ended without being asked to.
const exitedByItself = "testpmd exited by itself"

// startFailed are the lines of a port that will never come up: testpmd goes on running without it.
var startFailed = []string{"Fail to start port", "No probed ethernet devices"}

// diagLines is how many lines of memif and EAL messages a failure report quotes.
const diagLines = 15

// line handles one line of testpmd's output (from the reader goroutine, in order).
func (p *Peer) line(l string) {
	if p.o.Echo != nil {
		p.o.Echo(l)
	}
	p.mu.Lock()
	p.stats.line(l)
	p.keepDiag(l)
	everConnected, up := p.seenLocked(Connected), p.upLocked()
	// testpmd checks link statuses again when it stops its ports
	firstStart := p.o.Role == "server" && !p.portStarted && strings.Contains(l, portStartedLine)
	p.portStarted = p.portStarted || firstStart
	p.broadcast()
	p.mu.Unlock()
	switch {
	case firstStart:
		// The listener was bound at probe; check it anyway before telling a client to come.
		go p.announceListener()
	case !everConnected && containsAny(l, startFailed):
		p.fail(ExitNeverConnected, "port probe/start failed:\n  %s", strings.Join(p.diag(), "\n  "))
		p.stop("no port started")
	case !up && strings.Contains(l, connectedLine):
		p.event(Connected)
		if p.o.Duration > 0 && !everConnected {
			time.AfterFunc(p.o.Duration, func() { p.stop("ran for " + p.o.Duration.String()) })
		}
	case up && containsAny(l, peerLeft):
		p.event(Disconnected)
		if p.o.Role == "client" || p.o.UntilPeerLeaves {
			p.stop("the peer left") // a DPDK memif client never reconnects: nothing more will happen
		}
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// keepDiag keeps the last memif and EAL messages, for a failure report.
func (p *Peer) keepDiag(l string) {
	low := strings.ToLower(l)
	eal := strings.Contains(low, "eal:") && strings.Contains(low, "error")
	if !eal && !containsAny(low, []string{"memif", "fail", "secret", "no probed"}) {
		return
	}
	p.diagRing = append(p.diagRing, l)
	if len(p.diagRing) > diagLines {
		p.diagRing = p.diagRing[len(p.diagRing)-diagLines:]
	}
}

func (p *Peer) diag() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.diagRing...)
}

// event records e and tells the waiters.
func (p *Peer) event(e Event) {
	if e == Listening {
		p.reportEvent(e, "memif-peer: listening socket=%s", p.o.socketName())
		return
	}
	p.reportEvent(e, "memif-peer: %s", e)
}

// upLocked reports whether the link is up: DPDK may log one disconnect twice (the control
// channel's and the interface's), and only transitions are events.
func (p *Peer) upLocked() bool {
	for i := len(p.events) - 1; i >= 0; i-- {
		switch p.events[i] {
		case Connected:
			return true
		case Disconnected:
			return false
		}
	}
	return false
}

func (p *Peer) seenLocked(e Event) bool {
	for _, x := range p.events {
		if x == e {
			return true
		}
	}
	return false
}

// announceListener reports Listening once the listener shows in /proc/net/unix.
func (p *Peer) announceListener() {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if up, err := ListenerUp(p.o.socketName()); err != nil || up {
			if err != nil {
				p.report("memif-peer: %v", err)
			}
			p.event(Listening)
			return
		}
		select {
		case <-p.proc.exited:
			return
		case <-tick.C:
		}
	}
}

// supervise enforces the connect timeout and, once testpmd has exited, settles the exit code
// and cleans up.
func (p *Peer) supervise() {
	if p.o.ConnectTimeout > 0 {
		timer := time.NewTimer(p.o.ConnectTimeout)
		select {
		case <-timer.C:
			if !p.Seen(Connected) {
				p.fail(ExitNeverConnected, "not connected after %v", p.o.ConnectTimeout)
				p.stop("the link did not come up in " + p.o.ConnectTimeout.String())
			}
		case <-p.proc.exited:
			timer.Stop()
		}
	}
	<-p.proc.exited
	p.mu.Lock()
	byItself := !p.stopping
	if byItself { // and a Stop from now on has nothing to stop or to say
		p.stopping, p.why = true, exitedByItself
	}
	p.mu.Unlock()
	status := p.proc.status
	if byItself {
		p.fail(ExitFailed, "dpdk-testpmd exited by itself (status %d)", status)
	}
	p.mu.Lock()
	code, connected := p.code, p.seenLocked(Connected)
	p.mu.Unlock()
	switch {
	case code != ExitOK:
	case status != 0:
		// testpmd exits 0 on SIGINT; 139 = SIGSEGV, seen in DPDK 22.11 memif at (dis)connect
		p.fail(ExitFailed, "dpdk-testpmd ended with status %d", status)
	case !connected:
		p.fail(ExitNeverConnected, "never connected; testpmd's memif/EAL messages:\n  %s", strings.Join(p.diag(), "\n  "))
	}
	removeEALState(p.o.Prefix)
	p.proc.removeLog()
	p.mu.Lock()
	p.broadcast()
	p.mu.Unlock()
	close(p.done)
}
