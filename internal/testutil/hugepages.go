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
	if m.Free >= pages {
		return nil
	}
	want := m.Total + pages - m.Free
	if err := os.WriteFile("/proc/sys/vm/nr_hugepages", []byte(strconv.Itoa(want)), 0o644); err != nil {
		return fmt.Errorf("raise vm.nr_hugepages to %d: %w", want, err)
	}
	if m, err = Hugepages(); err != nil {
		return err
	}
	if m.Free < pages {
		return fmt.Errorf("only %d of %d 2Mi hugepages free after raising vm.nr_hugepages", m.Free, pages)
	}
	return nil
}

// HugepageInfo is the default hugepage size's line of /proc/meminfo.
type HugepageInfo struct {
	Total, Free int // pages
	PageKB      int // Hugepagesize
}

// Hugepages reads the default hugepage size's counters from /proc/meminfo.
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
		case "Hugepagesize":
			m.PageKB = n
		}
	}
	if err := s.Err(); err != nil {
		return m, fmt.Errorf("read meminfo: %w", err)
	}
	return m, nil
}
