package node

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/internal/testutil"
)

// The kubelet's paths are fixed (names.KubeletDir): the device plugin API hard-codes them.
const (
	NodeName   = "memifnet-e2e"
	pluginHTTP = "127.0.0.1:19102"
)

// ClaimKubeletDirs makes sure no kubelet owns /var/lib/kubelet, and registers the removal of
// what the kubelet will create there and in /var/log and the cgroup trees (only the parts that
// did not exist before). Call it before StartContainerd so that it runs after containerd stops.
func (s *Stack) ClaimKubeletDirs() error {
	if _, err := os.Stat(names.KubeletDir); err == nil {
		return fmt.Errorf("%s exists: a kubelet runs or ran on this machine; the e2e needs a machine without one (or remove it)", names.KubeletDir)
	}
	var created []string
	for _, d := range []string{names.KubeletDir, "/var/log/pods", "/var/log/containers"} {
		if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
			created = append(created, d)
		}
	}
	cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	hadCgroups := len(cgroups) > 0
	s.onTeardown("remove the kubelet's directories", func() error {
		var errs []error
		for _, d := range created {
			if err := testutil.UnmountAll(d); err != nil {
				errs = append(errs, err)
			}
			if err := os.RemoveAll(d); err != nil {
				errs = append(errs, err)
			}
		}
		if !hadCgroups {
			// Empty leftovers of the kubelet's cgroup tree (every process in it is gone).
			_ = exec.Command("sh", "-c", "find /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/kubepods.slice -depth -type d -exec rmdir {} + 2>/dev/null").Run()
		}
		return errors.Join(errs...)
	})
	return nil
}

func (s *Stack) kubeletArgs(bin string) []string {
	return []string{bin, "--config", s.Path("kubelet", "config.yaml"), "--root-dir", names.KubeletDir,
		"--cert-dir", s.Path("kubelet", "pki"), "--hostname-override", NodeName,
		"--containerd", s.ContainerdSock(), "--v=2"}
}

// StaticPodDir is where StartKubelet's kubelet looks for pod manifests.
func (s *Stack) StaticPodDir() string { return s.Path("kubelet", "manifests") }

// StartKubelet writes the KubeletConfiguration and starts a standalone kubelet (no API server:
// static pods only) against the stack's containerd, then waits for /healthz.
func (s *Stack) StartKubelet(ctx context.Context, bin string) error {
	cfg := KubeletConfig{ContainerdSock: s.ContainerdSock(), StaticPodDir: s.StaticPodDir()}.YAML()
	if err := os.MkdirAll(s.StaticPodDir(), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(s.Path("kubelet", "config.yaml"), []byte(cfg), 0o644); err != nil {
		return err
	}
	first := s.Kubelet == nil
	if err := s.startKubelet(ctx, bin); err != nil {
		return err
	}
	if first {
		s.onTeardown("stop kubelet", func() error { return s.Kubelet.Stop(syscall.SIGTERM, 20*time.Second) })
	}
	return nil
}

func (s *Stack) startKubelet(ctx context.Context, bin string) error {
	start := time.Now()
	p, err := Start("kubelet", s.Path("logs", "kubelet.log"), s.kubeletArgs(bin)...)
	if err != nil {
		return err
	}
	s.Kubelet = p
	err = Poll(ctx, 60*time.Second, "kubelet /healthz", func() (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("kubelet exited: %v (see %s)", p.Err(), p.Log)
		}
		b, err := httpGet(ctx, "http://127.0.0.1:10248/healthz")
		return err == nil && string(b) == "ok", err
	})
	if err == nil {
		s.Logf("kubelet up in %.2fs (pid %d)", time.Since(start).Seconds(), p.PID())
	}
	return err
}

// KillKubelet SIGKILLs the kubelet, as a crash would, and starts it again.
func (s *Stack) KillKubelet(ctx context.Context, bin string) error {
	if err := s.Kubelet.Stop(syscall.SIGKILL, 10*time.Second); err != nil {
		return err
	}
	s.Logf("kubelet killed (SIGKILL)")
	return s.startKubelet(ctx, bin)
}

// KubeletPods is the kubelet's own view of its pods (GET /pods on its API).
func (s *Stack) KubeletPods(ctx context.Context) ([]corev1.Pod, error) {
	b, err := httpGet(ctx, "https://127.0.0.1:10250/pods")
	if err != nil {
		return nil, err
	}
	var list corev1.PodList
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// KubeletPod returns the kubelet's view of static pod name (without the node suffix).
func (s *Stack) KubeletPod(ctx context.Context, name string) (*corev1.Pod, error) {
	pods, err := s.KubeletPods(ctx)
	if err != nil {
		return nil, err
	}
	for i := range pods {
		if pods[i].Name == name+"-"+NodeName {
			return &pods[i], nil
		}
	}
	return nil, fmt.Errorf("kubelet has no pod %s", name)
}

// WritePod drops a static pod manifest; RemovePod takes it away (the kubelet deletes the pod).
func (s *Stack) WritePod(p *corev1.Pod) error {
	p.APIVersion, p.Kind = "v1", "Pod"
	b, err := yaml.Marshal(p)
	if err != nil {
		return err
	}
	// The temp file's name starts with a dot: the kubelet's static pod source skips hidden files.
	return safefs.WriteFile(filepath.Join(s.StaticPodDir(), p.Name+".yaml"), b, 0o644, safefs.WriteOptions{})
}

// RemovePod removes a static pod manifest.
func (s *Stack) RemovePod(name string) error {
	err := os.Remove(filepath.Join(s.StaticPodDir(), name+".yaml"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// EnsureHugepages makes sure n free 2Mi hugepages exist, raising vm.nr_hugepages if needed; the
// teardown puts the old value back.
func (s *Stack) EnsureHugepages(n int) error {
	old, now, err := testutil.RaiseHugepages(n, func(old int) error {
		s.onTeardown("restore vm.nr_hugepages", func() error {
			return os.WriteFile("/proc/sys/vm/nr_hugepages", []byte(strconv.Itoa(old)), 0o644)
		})
		return nil
	})
	if err == nil && now != old {
		s.Logf("vm.nr_hugepages %d -> %d", old, now)
	}
	return err
}

// StartPlugin runs the real memif-deviceplugin with the given config against the real kubelet
// and waits until PodResources reports its devices allocatable.
func (s *Stack) StartPlugin(ctx context.Context, config string, wantSlots int) error {
	if err := os.WriteFile(s.Path("deviceplugin.yaml"), []byte(config), 0o644); err != nil {
		return err
	}
	start := time.Now()
	p, err := Start("memif-deviceplugin", s.Path("logs", "deviceplugin.log"), s.Bin("memif-deviceplugin"),
		"--config", s.Path("deviceplugin.yaml"), "--kubelet-dir", names.KubeletDir, "--state-dir", s.StateDir(),
		"--devinfo-dir", filepath.Join(s.DevInfoDir(), "dp"), "--http-address", "", "--local-metrics-address", pluginHTTP,
		"--reclaim-interval", "1s", "--log-format", "text")
	if err != nil {
		return err
	}
	s.Plugin = p
	s.onTeardown("stop memif-deviceplugin", func() error { return p.Stop(syscall.SIGTERM, 10*time.Second) })
	err = Poll(ctx, 60*time.Second, "device plugin devices allocatable", func() (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("memif-deviceplugin exited: %v (see %s)", p.Err(), p.Log)
		}
		ids, err := Allocatable(ctx, filepath.Join(names.KubeletDir, names.PodResourcesSocket), names.SocketResource)
		return err == nil && len(ids) == wantSlots, err
	})
	if err == nil {
		s.Logf("memif-deviceplugin registered with the kubelet; %d slots allocatable after %.2fs (pid %d)", wantSlots, time.Since(start).Seconds(), p.PID())
	}
	return err
}

// PluginMetric reads one sample of the plugin's /metrics (its local plain-HTTP endpoint: this
// stack has no API server to review tokens for the HTTPS one), e.g.
// memifnet_deviceplugin_registrations_total{resource="memifnet.io/socket"}.
func (s *Stack) PluginMetric(ctx context.Context, series string) (float64, error) {
	b, err := httpGet(ctx, "http://"+pluginHTTP+"/metrics")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("no %s in /metrics", series)
}

var kubeletHTTP = &http.Client{
	Timeout:   3 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, // the kubelet's self-signed certificate
}

func httpGet(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := kubeletHTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return b, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return b, err
}
