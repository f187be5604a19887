package memif

import (
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/memifnet/memifnet/pkg/memif/portstatus"
)

// statusInterval is how often a port's status file is rewritten (tests shorten it).
var statusInterval atomic.Int64

func init() { statusInterval.Store(int64(portstatus.DefaultInterval)) }

// statusWriter keeps <slot>/status.json of a port opened with OpenPort up to date: at every
// interval, at once when the link goes up or down, and a last time (state closed) at Close. The
// file is replaced by rename, so a reader never sees half of one. Failing to write never harms
// the port: it is logged and tried again at the next interval.
type statusWriter struct {
	i        *Interface
	root     *os.Root // the slot directory, opened once: nothing is resolved through a path again
	interval time.Duration
	stop     chan struct{}
	done     chan struct{}
	failing  bool // the last write failed (logged once until one succeeds)
}

// startStatus starts writing the status file into dir.
func (i *Interface) startStatus(dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("memif port %s: status file: %w", i.cfg.Name, err)
	}
	w := &statusWriter{i: i, root: root, interval: time.Duration(statusInterval.Load()),
		stop: make(chan struct{}), done: make(chan struct{})}
	i.mu.Lock()
	i.status = w
	i.mu.Unlock()
	go w.run()
	return nil
}

func (w *statusWriter) run() {
	defer close(w.done)
	tick := time.NewTicker(w.interval)
	defer tick.Stop()
	up, due := false, true
	for {
		changed := w.i.Changed()   // before looking: a change from now on wakes us
		if due || w.i.Up() != up { // a failed attempt, which changes nothing, is no reason to write
			up = w.write("")
		}
		select {
		case <-w.stop:
			w.write(portstatus.StateClosed)
			return
		case <-tick.C:
			due = true
		case <-changed:
			due = false
		}
	}
}

// close writes the last status and stops the writer. Call it once, after the link is down.
func (w *statusWriter) close() {
	close(w.stop)
	<-w.done
	w.root.Close()
}

// write replaces the file with a snapshot; state overrides the link's when set. It returns
// whether the snapshot had the link up.
func (w *statusWriter) write(state string) bool {
	st := w.i.Stats()
	if err := w.replace(w.snapshot(st, state)); err != nil {
		if !w.failing {
			w.i.log.Warn("memif: cannot write the port status file (retrying quietly)", "err", err)
		}
		w.failing = true
	} else {
		w.failing = false
	}
	return st.Up
}

// snapshot is the status file's view of st.
func (w *statusWriter) snapshot(st InterfaceStats, state string) portstatus.Status {
	if state == "" {
		state = portstatus.StateDown
		if st.Up {
			state = portstatus.StateUp
		}
	}
	s := portstatus.Status{
		Version: portstatus.Version, Port: st.Name, State: state,
		Time: time.Now().UTC().Truncate(time.Millisecond), IntervalSeconds: int(max(w.interval/time.Second, 1)),
		LinkUps: st.LinkUps, LinkDowns: st.LinkDowns, LastDownReason: st.LastDownReason,
		Rx: counters(Sum(st.Rx)), Tx: counters(Sum(st.Tx)),
	}
	if st.LastDownReason != portstatus.ReasonNone && st.LastDownError != nil {
		s.LastDownMessage = portstatus.TruncateMessage(st.LastDownError.Error())
	}
	return s
}

func counters(s Stats) portstatus.Counters {
	return portstatus.Counters{Packets: s.Packets, Bytes: s.Bytes, Drops: s.Drops, BadDescriptors: s.BadDescs, RingFull: s.NoBuf}
}

// statusTemp is the file a new status is written to before it replaces the old one.
const statusTemp = "." + portstatus.File + ".tmp"

// replace writes data to the temporary file and renames it over the status file.
func (w *statusWriter) replace(s portstatus.Status) error {
	data, err := portstatus.Marshal(s)
	if err != nil {
		return err
	}
	f, err := w.root.OpenFile(statusTemp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		w.root.Remove(statusTemp) // best effort: the next write truncates it anyway
		return werr
	}
	if err := w.root.Rename(statusTemp, portstatus.File); err != nil {
		w.root.Remove(statusTemp)
		return err
	}
	return nil
}
