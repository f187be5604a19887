// Command efping measures the round trip of two processes waking each other through eventfds with
// blocking reads (no Go poller involved): the platform's floor for interrupt-mode wake-ups.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	buf := make([]byte, 8)
	if len(os.Args) > 1 { // child: echo
		in, out := 3, 4
		for {
			if _, err := unix.Read(in, buf); err != nil {
				return
			}
			unix.Write(out, one)
		}
	}
	a, _ := unix.Eventfd(0, 0)
	b, _ := unix.Eventfd(0, 0)
	cmd := exec.Command("taskset", "-c", "0", os.Args[0], "child")
	cmd.ExtraFiles = []*os.File{os.NewFile(uintptr(a), "a"), os.NewFile(uintptr(b), "b")}
	cmd.Start()
	time.Sleep(200 * time.Millisecond)
	var d []time.Duration
	for range 2000 {
		t := time.Now()
		unix.Write(a, one)
		unix.Read(b, buf)
		d = append(d, time.Since(t))
		time.Sleep(200 * time.Microsecond) // let both sides go idle, as between pings
	}
	cmd.Process.Kill()
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	fmt.Printf("eventfd ping-pong, blocking reads, idle between rounds: p50 %v p99 %v\n", d[len(d)/2], d[len(d)*99/100])
}
