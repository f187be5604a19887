package testutil

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// NeedHugepages makes sure at least pages free 2Mi hugepages exist, raising vm.nr_hugepages if it
// must, or skips or fails the test (see SkipOrFail). It never lowers the setting: other tests may
// hold pages.
func NeedHugepages(t testing.TB, pages int) {
	t.Helper()
	if err := needHugepages(pages); err != nil {
		SkipOrFail(t, "hugepages unavailable: %v", err)
	}
}

func needHugepages(pages int) error {
	if os.Geteuid() != 0 {
		return errors.New("not root")
	}
	m, err := Hugepages()
	if err != nil {
		return err
	}
	if m.PageKB != 2048 {
		return fmt.Errorf("default hugepage size is %d kB, want 2048", m.PageKB)
	}
	_, _, err = RaiseHugepages(pages, nil)
	return err
}

// nrHugepages is the knob of the default hugepage size's pool.
const nrHugepages = "/proc/sys/vm/nr_hugepages"

// RaiseHugepages makes sure n hugepages of the default size are free, raising vm.nr_hugepages by
// what is missing; it never lowers it. before, if not nil, gets the old value before anything is
// written (to record it, so that it can be put back); an error from it changes nothing. It
// returns the value before and after.
func RaiseHugepages(n int, before func(old int) error) (old, now int, err error) {
	m, err := Hugepages()
	if err != nil {
		return 0, 0, err
	}
	b, err := os.ReadFile(nrHugepages)
	if err != nil {
		return 0, 0, err
	}
	if old, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", nrHugepages, err)
	}
	if m.Free >= n {
		return old, old, nil
	}
	if before != nil {
		if err := before(old); err != nil {
			return old, old, err
		}
	}
	now = old + n - m.Free
	if err := os.WriteFile(nrHugepages, []byte(strconv.Itoa(now)), 0o644); err != nil {
		return old, old, fmt.Errorf("raise vm.nr_hugepages to %d: %w", now, err)
	}
	if m, err = Hugepages(); err != nil {
		return old, now, err
	}
	if m.Free < n {
		return old, now, fmt.Errorf("asked the kernel for %d hugepages (vm.nr_hugepages %d -> %d): %d of the %d wanted are free",
			now-old, old, now, m.Free, n)
	}
	return old, now, nil
}

// HugepageInfo is the default hugepage size's lines of /proc/meminfo.
type HugepageInfo struct {
	Total, Free int // pages
	// Reserved (HugePages_Rsvd) are pages promised to mappings and not yet faulted in.
	Reserved int
	PageKB   int // Hugepagesize
}

// Hugepages reads the default hugepage size's counters from /proc/meminfo: the one reader of
// it for the tests, the e2e harness and the DPDK peer.
func Hugepages() (HugepageInfo, error) {
	var m HugepageInfo
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return m, fmt.Errorf("read meminfo: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, _ := strings.Cut(s.Text(), ":")
		n, _ := strconv.Atoi(strings.Fields(v + " 0")[0])
		switch k {
		case "HugePages_Free":
			m.Free = n
		case "HugePages_Total":
			m.Total = n
		case "HugePages_Rsvd":
			m.Reserved = n
		case "Hugepagesize":
			m.PageKB = n
		}
	}
	if err := s.Err(); err != nil {
		return m, fmt.Errorf("read meminfo: %w", err)
	}
	return m, nil
}
