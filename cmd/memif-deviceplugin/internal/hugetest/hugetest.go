// Package hugetest makes 2Mi hugepages available to tests, or skips them
// with the reason; with CI=true the skip is a failure, because CI runs as
// root and must exercise the hugepage code.
package hugetest

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Need makes sure at least pages free 2Mi hugepages exist, raising
// vm.nr_hugepages if it must. It never lowers the setting: other tests may
// hold pages.
func Need(t testing.TB, pages int) {
	t.Helper()
	if err := need(pages); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("hugepages needed in CI: %v", err)
		}
		t.Skipf("skipping: hugepages unavailable: %v", err)
	}
}

func need(pages int) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("not root")
	}
	free, total, err := meminfo()
	if err != nil {
		return err
	}
	if free >= pages {
		return nil
	}
	want := total + pages - free
	if err := os.WriteFile("/proc/sys/vm/nr_hugepages", []byte(strconv.Itoa(want)), 0o644); err != nil {
		return fmt.Errorf("raise vm.nr_hugepages to %d: %w", want, err)
	}
	if free, _, err = meminfo(); err != nil {
		return err
	}
	if free < pages {
		return fmt.Errorf("only %d of %d 2Mi hugepages free after raising vm.nr_hugepages", free, pages)
	}
	return nil
}

func meminfo() (free, total int, err error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, 0, fmt.Errorf("read meminfo: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	size := 0
	for s.Scan() {
		k, v, _ := strings.Cut(s.Text(), ":")
		n, _ := strconv.Atoi(strings.Fields(v + " 0")[0])
		switch k {
		case "HugePages_Free":
			free = n
		case "HugePages_Total":
			total = n
		case "Hugepagesize":
			size = n
		}
	}
	if size != 2048 {
		return 0, 0, fmt.Errorf("default hugepage size is %d kB, want 2048", size)
	}
	return free, total, s.Err()
}
