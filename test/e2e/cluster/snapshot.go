package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/internal/testutil"
)

// Snapshot is the host state a cluster may change: mounts (with their propagation), network
// namespaces, network devices, routes, iptables rules, hugepages, cgroups, the host paths a node
// creates, and the processes of the programs the cluster runs. Compare one taken before Up with one taken after
// Down: they must be equal.
type Snapshot struct {
	Mounts []string // "<path> <propagation>", propagation of shared mounts without peer group
	Netns  []string
	Links  []string
	Routes []string // `ip route` of the main table, one per line
	// Cgroups are the directories at the top of each cgroup hierarchy ("<hierarchy>/<name>"):
	// the kubelets' kubepods and the extra nodes' roots go there.
	Cgroups   []string
	Iptables  []string // rules and chains of every table, IPv4 and IPv6, without counters
	Hugepages string
	// HugepagesFree is HugePages_Free, the machine's: other users of hugepages change it, so
	// Diff leaves it out (the tier-3 Uninstall step compares it, waiting).
	HugepagesFree int
	Paths         []string // host paths that exist (of hostPaths, the CNI files, the state dir's tree)
	Processes     []string // "<pid> <argv0>" of cluster programs
	// Distro are the cluster paths the snapshot looked at (with Kubeadm's, always).
	Distro Paths
}

// programs whose processes must not outlive the cluster.
var clusterPrograms = regexp.MustCompile(`(^|/)(kube|kubelet|kube-apiserver|kube-controller-manager|kube-scheduler|etcd|containerd|containerd-shim-runc-v2|memif-deviceplugin|memif-cni-install|memif-perf|memif-webhook|pause|multus)$`)

// MemifnetFiles are the globs of memifnet's files in directories it shares with others.
var MemifnetFiles = []string{
	names.KubeletDir + "/device-plugins/memifnet*", names.KubeletDir + "/plugins/memifnet.io*",
	names.KubeletDir + "/plugins_registry/memifnet.io*", "/run/cdi/memifnet*", "/etc/cdi/memifnet*",
	"/run/k8s.cni.cncf.io/devinfo/*/memifnet*",
}

// TakeSnapshot reads the host state, for a cluster with paths p: its CNI dirs and kubeconfig
// dir, every directory above them, and Kubeadm's (a cluster with other paths must leave those
// alone).
func TakeSnapshot(p Paths) (Snapshot, error) {
	s := Snapshot{Distro: p.orDefault()}
	ms, err := safefs.ReadMountinfo()
	if err != nil {
		return s, err
	}
	for _, m := range ms {
		s.Mounts = append(s.Mounts, m.Point+" "+m.Propagation())
	}
	sort.Strings(s.Mounts)
	if ents, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range ents {
			s.Netns = append(s.Netns, e.Name())
		}
	}
	if ents, err := os.ReadDir("/sys/class/net"); err == nil {
		for _, e := range ents {
			s.Links = append(s.Links, e.Name())
		}
	}
	s.Routes, s.Cgroups = routes(), topCgroups()
	counters := regexp.MustCompile(`^(:\S+ \S+) \[\d+:\d+\]$`)
	for _, fam := range []string{"iptables-save", "ip6tables-save"} {
		out, err := exec.Command(fam).Output()
		if err != nil {
			return s, fmt.Errorf("%s: %w", fam, err)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if l == "" || strings.HasPrefix(l, "#") {
				continue
			}
			s.Iptables = append(s.Iptables, fam+": "+counters.ReplaceAllString(l, "$1"))
		}
	}
	b, _ := os.ReadFile("/proc/sys/vm/nr_hugepages")
	s.Hugepages = strings.TrimSpace(string(b))
	s.HugepagesFree = hugepagesFree()
	_ = filepath.WalkDir(names.StateDir, func(p string, _ os.DirEntry, err error) error {
		if err == nil && p != names.StateDir {
			s.Paths = append(s.Paths, p) // the agent's tree; WalkDir follows no symlink
		}
		return nil
	})
	s.Paths = append(s.Paths, cniPaths(s.Distro)...)
	// What memifnet leaves in directories it shares with others: the kubelet's device plugin
	// and DRA plugin sockets and registrations, CDI specs, NPWG device-info files.
	for _, g := range MemifnetFiles {
		if m, err := filepath.Glob(g); err == nil {
			s.Paths = append(s.Paths, m...)
		}
	}
	sort.Strings(s.Paths)
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmd) == 0 {
			continue
		}
		if argv0 := strings.SplitN(string(cmd), "\x00", 2)[0]; clusterProcess(argv0) {
			if _, err := fmt.Sscan(e.Name(), new(int)); err == nil {
				s.Processes = append(s.Processes, e.Name()+" "+argv0)
			}
		}
	}
	return s, nil
}

// cniPaths are the paths of hostPaths and of the cluster paths p and Kubeadm that exist: every
// directory down to the CNI dirs and the kubeconfig's, the entries of those, and the kubeconfig.
func cniPaths(p Paths) []string {
	seen := map[string]bool{}
	var out []string
	add := func(paths ...string) {
		for _, x := range paths {
			if _, err := os.Lstat(x); err == nil && !seen[x] {
				seen[x] = true
				out = append(out, x)
			}
		}
	}
	add(hostPaths...)
	for _, q := range []Paths{Kubeadm, p} {
		add(q.ancestors()...)
		for _, d := range q.Dirs() {
			ents, _ := filepath.Glob(d + "/*")
			add(ents...)
		}
	}
	return out
}

// clusterProcess reports whether a process started as argv0 may be one of the cluster's. Programs
// run from the temp dir (go test of cmd/memif-perf runs /tmp/memif-perf-test-*/memif-perf) or
// from a working directory (./memif-perf) are others' builds on this shared machine: the cluster
// runs its programs by absolute path, and runc those of pods by absolute path or by name.
func clusterProcess(argv0 string) bool {
	return clusterPrograms.MatchString(argv0) && !strings.HasPrefix(argv0, os.TempDir()+"/") &&
		!strings.HasPrefix(argv0, "./") && !strings.HasPrefix(argv0, "../")
}

// Diff lists how after differs from s ("+" appeared, "-" went away), per kind.
func (s Snapshot) Diff(after Snapshot) []string {
	var out []string
	cmp := func(kind string, a, b []string) {
		had := map[string]int{}
		for _, x := range a {
			had[x]++
		}
		for _, x := range b {
			if had[x] > 0 {
				had[x]--
				continue
			}
			out = append(out, fmt.Sprintf("+%s %s", kind, x))
		}
		for _, x := range a {
			if had[x] > 0 {
				had[x]--
				out = append(out, fmt.Sprintf("-%s %s", kind, x))
			}
		}
	}
	cmp("mount", s.Mounts, after.Mounts)
	cmp("netns", s.Netns, after.Netns)
	cmp("link", s.Links, after.Links)
	cmp("route", s.Routes, after.Routes)
	cmp("cgroup", s.Cgroups, after.Cgroups)
	cmp("iptables", s.Iptables, after.Iptables)
	cmp("hugepages", []string{s.Hugepages}, []string{after.Hugepages})
	cmp("path", s.Paths, after.Paths)
	cmp("process", s.Processes, after.Processes)
	return out
}

// Leaks is what the cluster left behind between s (before Up) and after (after Down): every
// change to the cluster's own paths, mounts, iptables, hugepages and devices, and any of its
// processes still running. Changes others may make on a shared machine meanwhile (a mount in
// /tmp, a process ending) are not counted.
func (s Snapshot) Leaks(after Snapshot, base string) []string {
	ours := append(append(append([]string{}, hostPaths...), base), append(Kubeadm.Dirs(), s.Distro.orDefault().Dirs()...)...)
	under := func(p string) bool {
		for _, o := range ours {
			if p == o || strings.HasPrefix(p, o+"/") {
				return true
			}
		}
		return false
	}
	prop := func(ms []string) map[string]string {
		m := map[string]string{}
		for _, x := range ms {
			i := strings.LastIndexByte(x, ' ')
			m[x[:i]] = x[i+1:]
		}
		return m
	}
	before, now := prop(s.Mounts), prop(after.Mounts)
	var out []string
	for _, d := range s.Diff(after) {
		kind, what, _ := strings.Cut(d[1:], " ")
		added := d[0] == '+'
		switch kind {
		case "mount":
			path := what[:strings.LastIndexByte(what, ' ')]
			_, inBefore := before[path]
			_, inAfter := now[path]
			// containerd keeps its network namespaces under the cluster directory; others'
			// (tests making their own under /run/netns) are not the cluster's.
			cniNetns := strings.HasPrefix(path, "/run/netns/cni-")
			if under(path) || cniNetns || path == "/" || (inBefore && inAfter) {
				out = append(out, d)
			}
		case "netns":
			if added && strings.HasPrefix(what, "cni-") {
				out = append(out, d)
			}
		case "link":
			if added && (what == Bridge || what == NodeBridge || strings.HasPrefix(what, "veth") || strings.HasPrefix(what, "mnveth")) {
				out = append(out, d)
			}
		case "route":
			// The cluster's addresses only: others' tests route their own.
			if strings.HasPrefix(what, "10.244.") || strings.HasPrefix(what, "10.250.0.") {
				out = append(out, d)
			}
		case "cgroup":
			name := what[strings.IndexByte(what, '/')+1:]
			if name == "kubepods" || strings.HasPrefix(name, "node") {
				out = append(out, d)
			}
		case "process":
			if added {
				out = append(out, d)
			}
		default:
			out = append(out, d)
		}
	}
	return out
}

// ChangedUnder lists how after differs from s in the mounts and paths at or below dirs ("+"
// appeared, "-" went away).
func (s Snapshot) ChangedUnder(after Snapshot, dirs ...string) []string {
	var out []string
	for _, d := range s.Diff(after) {
		kind, what, _ := strings.Cut(d[1:], " ")
		if kind == "mount" {
			what = what[:strings.LastIndexByte(what, ' ')]
		}
		for _, dir := range dirs {
			if (kind == "mount" || kind == "path") && (what == dir || strings.HasPrefix(what, dir+"/")) {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

// hugepagesFree is HugePages_Free of /proc/meminfo (-1 when it cannot be read).
func hugepagesFree() int {
	m, err := testutil.Hugepages()
	if err != nil {
		return -1
	}
	return m.Free
}

// routes is `ip route` of the main table, one route a line.
func routes() []string {
	var out []string
	if b, err := exec.Command("ip", "route", "show").Output(); err == nil {
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l != "" {
				out = append(out, strings.TrimSpace(l))
			}
		}
	}
	return out
}

// topCgroups are the directories at the top of every cgroup hierarchy, "<hierarchy>/<name>".
func topCgroups() []string {
	var out []string
	for _, h := range cgroupHierarchies() {
		ents, _ := os.ReadDir(h)
		for _, e := range ents {
			if e.IsDir() {
				out = append(out, filepath.Base(h)+"/"+e.Name())
			}
		}
	}
	return out
}
