package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	cri "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/testutil"
)

// Images the stack builds and imports. Names under localhost/ are left alone by the runtime's
// docker-style normalisation, and nothing is ever pulled.
const (
	Image      = "localhost/memifnet/memifnet:e2e"
	PauseImage = "localhost/memifnet/pause:e2e"
	Bridge     = "memife2e0"
)

// Stack is one node's worth of components under Base. Its methods narrate through Logf.
type Stack struct {
	Repo string // repository root (for go build)
	Base string // everything the stack writes, except what the kubelet insists on
	Logf func(format string, a ...any)

	Containerd *Proc
	Kubelet    *Proc
	Plugin     *Proc
	CRI        *CRI

	mu       sync.Mutex
	teardown []step // run in reverse by Teardown
}

type step struct {
	what string
	fn   func() error
}

// New returns a stack rooted at base; nothing is started yet.
func New(repo, base string, logf func(string, ...any)) *Stack {
	return &Stack{Repo: repo, Base: base, Logf: logf}
}

// Path joins elements under Base.
func (s *Stack) Path(elem ...string) string {
	return filepath.Join(append([]string{s.Base}, elem...)...)
}

// Bin is where Build puts the binaries.
func (s *Stack) Bin(name string) string { return s.Path("bin", name) }

// StateDir is the device plugin's and the CNI's state dir (sockets/, pools/, links/, state/).
func (s *Stack) StateDir() string { return s.Path("memifnet") }

// DevInfoDir is the NPWG device-info root (dp/ and cni/ below it).
func (s *Stack) DevInfoDir() string { return s.Path("devinfo") }

// ContainerdSock is the CRI endpoint.
func (s *Stack) ContainerdSock() string { return s.Path("containerd", "containerd.sock") }

func (s *Stack) onTeardown(what string, fn func() error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.teardown = append(s.teardown, step{what, fn})
}

// Teardown runs every undo step registered so far, newest first, and reports all failures. It
// is safe to call more than once and from a signal handler's goroutine.
func (s *Stack) Teardown() error {
	s.mu.Lock()
	steps := s.teardown
	s.teardown = nil
	s.mu.Unlock()
	var errs []error
	for i := len(steps) - 1; i >= 0; i-- {
		if err := steps[i].fn(); err != nil {
			errs = append(errs, fmt.Errorf("teardown: %s: %w", steps[i].what, err))
		}
	}
	return errors.Join(errs...)
}

// Prepare makes Base (refusing one that exists: another run may own it) and registers its
// removal, after unmounting whatever is still mounted below it.
func (s *Stack) Prepare() error {
	if _, err := os.Stat(s.Base); err == nil {
		return fmt.Errorf("%s exists: another run is active or a previous one was killed; "+
			"stop what runs from it and remove it", s.Base)
	}
	if err := os.MkdirAll(s.Base, 0o755); err != nil {
		return err
	}
	s.onTeardown("remove "+s.Base, func() error {
		if err := testutil.UnmountAll(s.Base); err != nil {
			return err
		}
		return os.RemoveAll(s.Base)
	})
	return nil
}

// Build compiles the binaries (static) and the two images.
func (s *Stack) Build(ctx context.Context) error {
	start := time.Now()
	// Each binary is named after its package's directory (Bin(name)).
	if err := (testutil.Build{Dir: s.Repo, Pkgs: []string{"./cmd/memif-cni", "./cmd/memif-cni-podinfo",
		"./cmd/memif-deviceplugin", "./cmd/memif-cni-install", "./cmd/memif-perf", "./hack/pause",
		"./test/hostile/podsim", "./hack/image"}}).Into(ctx, s.Path("bin")); err != nil {
		return err
	}
	if err := s.run(ctx, s.Repo, nil, s.Bin("image"), "-o", s.Path("images", "memifnet.tar"), "-t", Image,
		"-entrypoint", "/usr/local/bin/memif-deviceplugin",
		s.Bin("memif-perf")+"=/usr/local/bin/memif-perf",
		s.Bin("memif-cni")+"=/usr/local/bin/memif-cni",
		s.Bin(names.PodInfoHelper)+"=/usr/local/bin/"+names.PodInfoHelper,
		s.Bin("memif-deviceplugin")+"=/usr/local/bin/memif-deviceplugin",
		s.Bin("memif-cni-install")+"=/usr/local/bin/memif-cni-install",
		// The hostile-pod simulator (test/hostile/podsim): in this test image only, never in make image's.
		s.Bin("podsim")+"=/usr/local/bin/podsim"); err != nil {
		return err
	}
	if err := s.run(ctx, s.Repo, nil, s.Bin("image"), "-o", s.Path("images", "pause.tar"), "-t", PauseImage,
		"-entrypoint", "/pause", s.Bin("pause")+"=/pause"); err != nil {
		return err
	}
	s.Logf("built binaries and images in %.1fs", time.Since(start).Seconds())
	return nil
}

func (s *Stack) run(ctx context.Context, dir string, env []string, args ...string) error {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// CNIPlugin is one entry of the conflist after bridge.
type CNIPlugin = map[string]any

// StartContainerd writes containerd's config and a conflist (bridge, then memif; bridge alone
// when memif is nil, for memif-cni-install to chain into), links the CNI plugins into a private
// bin dir (plus memif-cni when memif is set), starts containerd, waits for its CRI and imports
// the images.
func (s *Stack) StartContainerd(ctx context.Context, memif CNIPlugin) error {
	for _, p := range []string{"containerd", "runc", "ctr"} {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Errorf("%s not found: apt-get install -y containerd runc containernetworking-plugins", p)
		}
	}
	if err := s.installCNI(memif); err != nil {
		return err
	}
	if err := os.MkdirAll(s.Path("containerd"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(s.Path("containerd", "config.toml"), []byte(s.containerdConfig()), 0o644); err != nil {
		return err
	}
	start := time.Now()
	p, err := Start("containerd", s.Path("logs", "containerd.log"), "containerd", "--config", s.Path("containerd", "config.toml"))
	if err != nil {
		return err
	}
	s.Containerd = p
	s.onTeardown("stop containerd", func() error {
		err := p.Stop(syscall.SIGTERM, 20*time.Second)
		// Shims outlive containerd by design; the sandboxes were removed before this step, so
		// any shim left is one of ours that failed to exit: find it by its -address argument.
		s.killShims()
		_ = exec.Command("ip", "link", "del", Bridge).Run()
		return err
	})
	if err := Poll(ctx, 30*time.Second, "containerd CRI", func() (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("containerd exited: %v (see %s)", p.Err(), p.Log)
		}
		c, err := DialCRI(ctx, s.ContainerdSock())
		if err != nil {
			return false, err
		}
		s.CRI = c
		return true, nil
	}); err != nil {
		return err
	}
	s.onTeardown("remove pod sandboxes", func() error { return s.CRI.RemoveAll(context.Background()) })
	s.Logf("containerd %s ready in %.2fs (pid %d)", s.CRI.Version, time.Since(start).Seconds(), p.PID())
	for _, img := range []string{"memifnet.tar", "pause.tar"} {
		if err := s.run(ctx, s.Base, nil, "ctr", "--address", s.ContainerdSock(), "-n", "k8s.io", "images", "import",
			s.Path("images", img)); err != nil {
			return err
		}
	}
	s.Logf("imported %s and %s", Image, PauseImage)
	return nil
}

// installCNI links the CNI plugins into the stack's private bin dir (plus memif-cni when memif
// is set) and writes the conflist.
func (s *Stack) installCNI(memif CNIPlugin) error {
	binDir := s.CNIBinDir()
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return err
	}
	plugins, _ := filepath.Glob("/usr/lib/cni/*")
	if len(plugins) == 0 {
		return errors.New("no CNI plugins in /usr/lib/cni: apt-get install -y containernetworking-plugins")
	}
	for _, p := range plugins {
		if err := os.Symlink(p, filepath.Join(binDir, filepath.Base(p))); err != nil {
			return err
		}
	}
	if memif != nil {
		for _, b := range []string{"memif-cni", names.PodInfoHelper} {
			if err := copyFile(s.Bin(b), filepath.Join(binDir, b), 0o755); err != nil {
				return err
			}
		}
	}
	return s.WriteConflist(memif)
}

// containerdConfig is containerd's config.toml: private root, state and socket, the stack's
// pause image, runc with cgroupfs, and the stack's CNI directories.
func (s *Stack) containerdConfig() string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = %[3]q
[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = %[4]q
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = %[5]q
    # Needed where root lacks CAP_SYS_RESOURCE (VMs, nested containers): without it runc cannot
    # apply the sandbox's oom_score_adj and every RunPodSandbox fails.
    restrict_oom_score_adj = true
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = %[6]q
      conf_dir = %[7]q
      max_conf_num = 1
`, s.Path("containerd", "root"), s.Path("containerd", "state"), s.ContainerdSock(), s.Path("containerd", "opt"),
		PauseImage, s.CNIBinDir(), s.Path("cni", "net.d"))
}

// Conflist is the one CNI configuration file containerd reads.
func (s *Stack) Conflist() string { return s.Path("cni", "net.d", "10-memifnet-e2e.conflist") }

// CNIBinDir is containerd's CNI bin dir.
func (s *Stack) CNIBinDir() string { return s.Path("cni", "bin") }

// WriteConflist (re)writes the one conflist: bridge with host-local IPAM, then memif-cni unless
// memif is nil. containerd reloads it on change.
func (s *Stack) WriteConflist(memif CNIPlugin) error {
	plugins := []any{
		map[string]any{
			"type": "bridge", "bridge": Bridge, "isGateway": false, "ipMasq": false,
			"ipam": map[string]any{
				"type": "host-local", "ranges": [][]map[string]string{{{"subnet": "10.244.77.0/24"}}},
				"dataDir": s.Path("cni", "ipam"),
			},
		},
	}
	if memif != nil {
		plugins = append(plugins, memif)
	}
	conf := map[string]any{"cniVersion": "1.0.0", "name": "memifnet-e2e", "plugins": plugins}
	return writeJSON(s.Conflist(), conf)
}

// CNILoaded reports whether containerd's loaded CNI configuration (CRI Status, verbose) names
// plugin type typ: containerd reloads the conflist asynchronously after a change.
func (s *Stack) CNILoaded(ctx context.Context, typ string) (bool, error) {
	st, err := s.CRI.Runtime.Status(ctx, &cri.StatusRequest{Verbose: true})
	if err != nil {
		return false, err
	}
	// The loaded networks, with each plugin's source JSON embedded as a string: compare without
	// escapes and blanks.
	flat := strings.NewReplacer(`\`, "", " ", "", "\n", "").Replace(st.Info["cniconfig"])
	return strings.Contains(flat, `"type":"`+typ+`"`), nil
}

// MemifCNI is the memif-cni entry for the conflist.
func (s *Stack) MemifCNI(kubeletDir string) CNIPlugin {
	return CNIPlugin{
		"type":          "memif-cni",
		"capabilities":  map[string]bool{"io.kubernetes.cri.pod-annotations": true},
		"stateDir":      s.StateDir(),
		"kubeletDir":    kubeletDir,
		"deviceInfoDir": s.DevInfoDir(),
		"kubeletURL":    "none",
	}
}

func (s *Stack) killShims() {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 0 && strings.HasSuffix(args[0], "containerd-shim-runc-v2") && strings.Contains(string(b), s.ContainerdSock()) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func copyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, mode)
}
