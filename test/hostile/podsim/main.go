// Command podsim plays a hostile pod for the hostile-pod suite (test/hostile). The suite starts it
// in a mount namespace of its own, with the pod's socket slots and pool units bind-mounted where a
// container sees them (/run/memifnet/...), as root without CAP_SYS_ADMIN or with a non-root uid,
// and sends it one command per line on stdin; it answers one line per command on stdout: "ok" and
// the result, or "err" and the error. It keeps file descriptors (and mappings) across commands
// under names the suite chooses, so a test can keep them across a scrub or pass them to another
// pod with SCM_RIGHTS.
//
//	symlink TARGET PATH        plant a symlink
//	write PATH TEXT            create or truncate PATH and write TEXT
//
// Every argument is URL path-escaped (%20 for a space), and so is every answer.
//
//	read PATH                  TEXT
//	mkdir PATH | rmdir PATH | remove PATH
//	open NAME PATH dir|rdwr|rdonly    keep an fd
//	readat NAME REL | writeat NAME REL TEXT | symlinkat NAME REL TARGET | mkdirat NAME REL | unlinkat NAME REL
//	ftruncate NAME SIZE | fchmod NAME OCTAL | fchown NAME UID GID | flock NAME
//	mmap NAME SIZE | mapread NAME OFF N | mapwrite NAME OFF TEXT | mapsum NAME
//	fill PATH              write zeros until the file system refuses; BYTES and the error
//	fillinodes DIR         create files until the file system refuses; COUNT and the error
//	listen SOCK | sendfd NAME SOCK | recvfd NAME     pass fds over a unix socket
//	kill PID SIGNAL            signal a process (kill 1 TERM ends a shared-namespace pause)
//	close NAME | exit
//
// In a pod of a real cluster there is nobody to send commands: "podsim -script 'CMD; CMD; ...'"
// runs the commands one after the other, printing each result, and then blocks. In a script,
// {slot} stands for the pod's first socket slot ($MEMIFNET_SOCKETS), and "unless PATH" skips the
// rest of the script when PATH exists (a marker a script leaves to run once per pod, though its
// container restarts).
package main

import (
	"bufio"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/internal/names"
)

type pod struct {
	fds  map[string]int
	maps map[string][]byte
	lis  int // listening socket for recvfd
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "-script" {
		runScript(os.Args[2])
		// A pod's process lives on until the kubelet stops it.
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, unix.SIGTERM, unix.SIGINT)
		<-stop
		return
	}
	// -container UID: the suite's script pivoted into the pod's root; finish the job.
	if len(os.Args) == 3 && os.Args[1] == "-container" {
		uid, _ := strconv.Atoi(os.Args[2])
		if err := becomeContainer(uid); err != nil {
			fmt.Fprintln(os.Stderr, "podsim:", err)
			os.Exit(1)
		}
	}
	p := &pod{fds: map[string]int{}, maps: map[string][]byte{}, lis: -1}
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		for i := range f {
			f[i] = text(f[i])
		}
		if f[0] == "exit" {
			return
		}
		res, err := p.do(f[0], f[1:])
		if err != nil {
			fmt.Fprintf(out, "err %s\n", url.PathEscape(err.Error()))
		} else {
			fmt.Fprintf(out, "ok %s\n", url.PathEscape(res))
		}
		out.Flush()
	}
}

// runScript runs the commands of a script, printing "cmd: ok result" or "cmd: err error" for each.
func runScript(script string) {
	slot, _, _ := strings.Cut(os.Getenv(names.EnvSockets), ",")
	p := &pod{fds: map[string]int{}, maps: map[string][]byte{}, lis: -1}
	for _, line := range strings.Split(script, ";") {
		f := strings.Fields(strings.ReplaceAll(line, "{slot}", slot))
		if len(f) == 0 {
			continue
		}
		if f[0] == "unless" && len(f) == 2 {
			if _, err := os.Lstat(f[1]); err == nil {
				fmt.Printf("%s exists: done before\n", f[1])
				return
			}
			continue
		}
		res, err := p.do(f[0], f[1:])
		if err != nil {
			fmt.Printf("%s: err %v\n", strings.Join(f, " "), err)
		} else {
			fmt.Printf("%s: ok %s\n", strings.Join(f, " "), res)
		}
	}
}

func text(s string) string {
	t, err := url.PathUnescape(s)
	if err != nil {
		return s
	}
	return t
}

func (p *pod) fd(name string) (int, error) {
	fd, ok := p.fds[name]
	if !ok {
		return -1, fmt.Errorf("no fd %q", name)
	}
	return fd, nil
}

func num(s string) int64 {
	n, _ := strconv.ParseInt(s, 0, 64)
	return n
}

func (p *pod) do(cmd string, a []string) (string, error) {
	need := map[string]int{"symlink": 2, "write": 2, "read": 1, "mkdir": 1, "rmdir": 1, "remove": 1, "open": 3,
		"readat": 2, "writeat": 3, "symlinkat": 3, "mkdirat": 2, "unlinkat": 2, "ftruncate": 2, "fchmod": 2,
		"fchown": 3, "flock": 1, "mmap": 2, "mapread": 3, "mapwrite": 3, "mapsum": 1, "fill": 1, "fillinodes": 1,
		"listen": 1, "sendfd": 2, "recvfd": 1, "close": 1, "kill": 2}
	n, ok := need[cmd]
	if !ok {
		return "", fmt.Errorf("unknown command %q", cmd)
	}
	if len(a) < n {
		return "", fmt.Errorf("%s needs %d arguments", cmd, n)
	}
	switch cmd {
	case "symlink":
		return "", unix.Symlink(a[0], a[1])
	case "write":
		return "", os.WriteFile(a[0], []byte(a[1]), 0o644)
	case "read":
		b, err := os.ReadFile(a[0])
		return string(b), err
	case "mkdir":
		return "", unix.Mkdir(a[0], 0o755)
	case "rmdir":
		return "", unix.Rmdir(a[0])
	case "remove":
		return "", unix.Unlink(a[0])
	case "open":
		flags := map[string]int{"dir": unix.O_RDONLY | unix.O_DIRECTORY, "rdwr": unix.O_RDWR, "rdonly": unix.O_RDONLY}[a[2]]
		fd, err := unix.Open(a[1], flags|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", err
		}
		p.fds[a[0]] = fd
		return "", nil
	case "kill":
		sig := map[string]unix.Signal{"TERM": unix.SIGTERM, "INT": unix.SIGINT, "KILL": unix.SIGKILL}[a[1]]
		if sig == 0 {
			return "", fmt.Errorf("unknown signal %q", a[1])
		}
		return "", unix.Kill(int(num(a[0])), sig)
	case "close":
		fd, err := p.fd(a[0])
		if err != nil {
			return "", err
		}
		delete(p.fds, a[0])
		if m, ok := p.maps[a[0]]; ok {
			_ = unix.Munmap(m)
			delete(p.maps, a[0])
		}
		return "", unix.Close(fd)
	}
	return p.doAt(cmd, a)
}

func (p *pod) doAt(cmd string, a []string) (string, error) {
	switch cmd {
	case "fill":
		return fill(a[0])
	case "fillinodes":
		return fillInodes(a[0])
	case "listen":
		return "", p.listen(a[0])
	case "recvfd":
		return "", p.recvfd(a[0])
	}
	fd, err := p.fd(a[0])
	if err != nil {
		return "", err
	}
	switch cmd {
	case "readat":
		f, err := unix.Openat(fd, a[1], unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", err
		}
		defer unix.Close(f)
		b := make([]byte, 64<<10)
		n, err := unix.Read(f, b)
		return string(b[:max(n, 0)]), err
	case "writeat":
		f, err := unix.Openat(fd, a[1], unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return "", err
		}
		defer unix.Close(f)
		_, err = unix.Write(f, []byte(a[2]))
		return "", err
	case "symlinkat":
		return "", unix.Symlinkat(a[2], fd, a[1])
	case "mkdirat":
		return "", unix.Mkdirat(fd, a[1], 0o755)
	case "unlinkat":
		return "", unix.Unlinkat(fd, a[1], 0)
	case "ftruncate":
		return "", unix.Ftruncate(fd, num(a[1]))
	case "fchmod":
		return "", unix.Fchmod(fd, uint32(num("0o"+strings.TrimPrefix(a[1], "0"))))
	case "fchown":
		return "", unix.Fchown(fd, int(num(a[1])), int(num(a[2])))
	case "flock":
		return "", unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
	case "mmap":
		m, err := unix.Mmap(fd, 0, int(num(a[1])), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			return "", err
		}
		p.maps[a[0]] = m
		return "", nil
	case "sendfd":
		return "", sendfd(fd, a[1])
	}
	m, ok := p.maps[a[0]]
	if !ok {
		return "", fmt.Errorf("%s is not mapped", a[0])
	}
	switch cmd {
	case "mapread":
		off, n := num(a[1]), num(a[2])
		return string(m[off : off+n]), nil
	case "mapwrite":
		copy(m[num(a[1]):], a[2])
		return "", nil
	case "mapsum":
		var sum uint64
		for _, c := range m {
			sum += uint64(c)
		}
		return strconv.FormatUint(sum, 10), nil
	}
	return "", fmt.Errorf("unknown command %q", cmd)
}

func fill(path string) (string, error) {
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, 4096)
	total := 0
	for total < 1<<30 {
		n, err := f.Write(buf)
		total += n
		if err != nil {
			return strconv.Itoa(total) + " " + err.Error(), nil
		}
	}
	return strconv.Itoa(total), nil
}

func fillInodes(dir string) (string, error) {
	for i := range 1 << 20 {
		f, err := os.Create(fmt.Sprintf("%s/f%d", dir, i))
		if err != nil {
			return strconv.Itoa(i) + " " + err.Error(), nil
		}
		f.Close()
	}
	return "1048576", nil
}

func (p *pod) listen(path string) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return err
	}
	if err := unix.Listen(fd, 1); err != nil {
		unix.Close(fd)
		return err
	}
	p.lis = fd
	return nil
}

func (p *pod) recvfd(name string) error {
	c, _, err := unix.Accept(p.lis)
	if err != nil {
		return err
	}
	defer unix.Close(c)
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(c, buf, oob, 0)
	if err != nil {
		return err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return fmt.Errorf("no fd received (%v)", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return fmt.Errorf("no fd received (%v)", err)
	}
	p.fds[name] = fds[0]
	return nil
}

func sendfd(fd int, path string) error {
	c, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(c)
	if err := unix.Connect(c, &unix.SockaddrUnix{Name: path}); err != nil {
		return err
	}
	return unix.Sendmsg(c, []byte{0}, unix.UnixRights(fd), nil, 0)
}
