package main

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// defaultCaps are the capabilities containerd and CRI-O give a container by default: no
// CAP_SYS_ADMIN, so no mounts.
var defaultCaps = []uintptr{unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_FSETID, unix.CAP_FOWNER,
	unix.CAP_MKNOD, unix.CAP_NET_RAW, unix.CAP_SETGID, unix.CAP_SETUID, unix.CAP_SETFCAP, unix.CAP_SETPCAP,
	unix.CAP_NET_BIND_SERVICE, unix.CAP_SYS_CHROOT, unix.CAP_KILL, unix.CAP_AUDIT_WRITE}

// becomeContainer finishes what a runtime does after pivot_root: it detaches the host's mounts
// (left at /.old), then drops to a container's capabilities, or to uid with none.
func becomeContainer(uid int) error {
	if err := unix.Unmount("/.old", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the host's mounts: %w", err)
	}
	_ = unix.Rmdir("/.old")
	keep := map[uintptr]bool{}
	var mask uint64
	for _, c := range defaultCaps {
		keep[c] = true
		mask |= 1 << c
	}
	for c := uintptr(0); c <= unix.CAP_LAST_CAP; c++ {
		if keep[c] {
			continue
		}
		// Every thread: the Go runtime runs this process on several.
		if _, _, e := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, c, 0); e != 0 {
			return fmt.Errorf("drop capability %d: %w", c, e)
		}
	}
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); e != 0 {
		return fmt.Errorf("no_new_privs: %w", e)
	}
	if uid != 0 {
		// Changing to a non-root uid clears every capability.
		if err := syscall.Setgroups(nil); err != nil {
			return err
		}
		if err := syscall.Setresgid(uid, uid, uid); err != nil {
			return err
		}
		return syscall.Setresuid(uid, uid, uid)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	data[0].Effective, data[0].Permitted = uint32(mask), uint32(mask)
	data[1].Effective, data[1].Permitted = uint32(mask>>32), uint32(mask>>32)
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptrOf(&hdr), uintptrOf(&data[0]), 0); e != 0 {
		return fmt.Errorf("capset: %w", e)
	}
	return nil
}
