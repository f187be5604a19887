package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/safefs"
)

// The PKI is what the components are configured with: the API server's certificate verifies
// under the CA for every name in-cluster clients and the host use, and the client certificates
// carry the identities RBAC and the Node authorizer expect.
func TestPKI(t *testing.T) {
	dir := t.TempDir()
	if err := generatePKI(dir, NodeName, net.ParseIP(ServiceIP), clients); err != nil {
		t.Fatal(err)
	}
	p := PKI{Dir: dir}
	caPEM, err := os.ReadFile(p.Path("ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	leaf := func(name string) *x509.Certificate {
		t.Helper()
		pair, err := tls.LoadX509KeyPair(p.Path(name+".crt"), p.Path(name+".key"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	api := leaf("apiserver")
	for _, host := range []string{"127.0.0.1", "localhost", ServiceIP, "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"} {
		if _, err := api.Verify(x509.VerifyOptions{DNSName: host, Roots: roots}); err != nil {
			t.Errorf("API server certificate for %s: %v", host, err)
		}
	}
	if _, err := api.Verify(x509.VerifyOptions{DNSName: "example.com", Roots: roots}); err == nil {
		t.Error("API server certificate verifies for example.com")
	}
	if _, err := leaf("kubelet-serving").Verify(x509.VerifyOptions{DNSName: NodeName, Roots: roots}); err != nil {
		t.Errorf("kubelet serving certificate for %s: %v", NodeName, err)
	}
	want := map[string][2]string{
		"admin":              {"memifnet-cluster-admin", "system:masters"},
		"kubelet":            {"system:node:" + NodeName, "system:nodes"},
		"controller-manager": {"system:kube-controller-manager", ""},
		"scheduler":          {"system:kube-scheduler", ""},
	}
	for name, id := range want {
		c := leaf(name)
		if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s: not a client certificate of the CA: %v", name, err)
		}
		if c.Subject.CommonName != id[0] || strings.Join(c.Subject.Organization, ",") != id[1] {
			t.Errorf("%s: CN %q O %q, want %q %q", name, c.Subject.CommonName, c.Subject.Organization, id[0], id[1])
		}
	}
	for _, f := range []string{"ca.key", "admin.key", "sa.key"} {
		st, err := os.Stat(p.Path(f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", f, err, st.Mode())
		}
	}
	kc, err := kubeconfig(p, "https://127.0.0.1:6443", "admin")
	if err != nil || !strings.Contains(string(kc), "client-certificate-data:") || !strings.Contains(string(kc), "server: https://127.0.0.1:6443") {
		t.Errorf("admin kubeconfig: %v\n%s", err, kc)
	}
}

// Leaks counts what the cluster may leave and nothing others may do meanwhile.
func TestSnapshotLeaks(t *testing.T) {
	before := Snapshot{
		Mounts:    []string{"/ private", "/tmp/x private", "/proc private"},
		Iptables:  []string{"iptables-save: *nat"},
		Hugepages: "1024",
		Processes: []string{"10 /usr/bin/containerd"},
	}
	after := before
	after.Mounts = []string{"/ shared", "/tmp/y private", "/proc private", "/var/lib/kubelet private"}
	after.Iptables = []string{"iptables-save: *nat", "iptables-save: :KUBE-KUBELET-CANARY -"}
	after.Netns = []string{"cni-1234", "other"}
	after.Links = []string{"lo", Bridge, "eth9", NodeBridge, "mnveth2"}
	after.Routes = []string{"10.244.89.0/24 via 10.250.0.2 dev memifnd0", "10.9.0.0/16 dev eth9"}
	after.Cgroups = []string{"cpuset/node2", "memory/kubepods", "memory/user.slice"}
	after.Processes = []string{"11 /x/kubelet"}
	after.Paths = []string{names.KubeletDir}
	got := before.Leaks(after, "/run/base")
	want := []string{
		"+mount / shared", "-mount / private", "+mount /var/lib/kubelet private",
		"+netns cni-1234", "+link " + Bridge, "+link " + NodeBridge, "+link mnveth2",
		"+route 10.244.89.0/24 via 10.250.0.2 dev memifnd0", "+cgroup cpuset/node2", "+cgroup memory/kubepods",
		"+iptables iptables-save: :KUBE-KUBELET-CANARY -",
		"+path " + names.KubeletDir, "+process 11 /x/kubelet",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("leaks:\n got %q\nwant %q", got, want)
	}
	if l := before.Leaks(before, "/run/base"); len(l) != 0 {
		t.Errorf("no change, leaks %q", l)
	}
}

// The propagation of the host's mounts reads as mount(8) names it.
func TestMountinfoPropagation(t *testing.T) {
	ms, err := safefs.ReadMountinfo()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		t.Fatal("no mounts")
	}
	for _, m := range ms {
		switch p := m.Propagation(); p {
		case "private", "shared", "slave", "shared,slave", "unbindable":
		default:
			t.Errorf("%s: propagation %q", m.Point, p)
		}
	}
}

func TestManifestImageLines(t *testing.T) {
	y := "spec:\n  containers:\n  - image: ghcr.io/memifnet/memifnet:v0.1.0\n    name: a\n  initContainers:\n    - name: b\n      image: \"ghcr.io/memifnet/memifnet:v0.1.0\"\n"
	var got []string
	for _, m := range imageLine.FindAllStringSubmatch(y, -1) {
		got = append(got, m[1])
	}
	if want := []string{"ghcr.io/memifnet/memifnet:v0.1.0", "ghcr.io/memifnet/memifnet:v0.1.0"}; !slices.Equal(got, want) {
		t.Errorf("images %q, want %q", got, want)
	}
}

// The state file round-trips, and a Down of a directory that holds no state refuses to touch it.
func TestStateAndForeignBase(t *testing.T) {
	base := t.TempDir()
	c := New("/repo", base, Inputs{KubeDir: "/k"}, nil)
	c.state.Inputs = c.In
	if err := c.record(Change{Kind: "path", Path: "/nonexistent/x"}); err != nil {
		t.Fatal(err)
	}
	d := New("/repo", base, Inputs{}, nil)
	found, err := d.load()
	if err != nil || !found || d.state.Inputs.KubeDir != "/k" || len(d.state.Changes) != 1 {
		t.Fatalf("load: %v %v %+v", found, err, d.state)
	}
	foreign := filepath.Join(t.TempDir(), "x")
	if err := os.Mkdir(foreign, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := New("/repo", foreign, Inputs{}, nil).Down(); err == nil || !strings.Contains(err.Error(), "no state.json") {
		t.Errorf("Down of a foreign directory: %v", err)
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Errorf("Down removed a foreign directory: %v", err)
	}
}

// What appeared in the node's CNI directories while the cluster ran goes; what was there stays.
func TestRemoveNewEntries(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"bridge", "memif-cni"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "memifnet.d"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := removeNewEntries([]string{filepath.Join(dir, "bridge")}, dir); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	if want := []string{filepath.Join(dir, "bridge")}; !slices.Equal(left, want) {
		t.Errorf("left %q, want %q", left, want)
	}
}

// The mount a path lies on is the deepest mount point above it, and of two stacked at one point
// the one mounted last: the one a path reaches, which makeShared changes and restorePropagation
// puts back.
func TestMountHolding(t *testing.T) {
	info := `22 1 0:21 / / rw shared:1 - overlay overlay rw
23 22 0:22 / /dev rw shared:2 - tmpfs tmpfs rw
24 23 0:23 / /dev/pts rw - devpts devpts rw
25 23 0:24 / /dev/pts rw shared:3 - devpts devpts rw
26 22 0:25 / /var/lib rw - ext4 /dev/sda1 rw
27 22 0:26 / /var/library rw - ext4 /dev/sdb1 rw
`
	all, err := safefs.ParseMountinfo(strings.NewReader(info))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{
		"/var/lib/memifnet": 26, "/var/lib": 26, "/var/libx": 22, "/var/library/a": 27,
		"/dev/pts/0": 25, "/dev/ptsx": 23, "/etc": 22, "/": 22,
	} {
		m, ok := mountHolding(all, path)
		if !ok || m.ID != want {
			t.Errorf("%s: mount %+v (%v), want id %d", path, m, ok, want)
		}
	}
}

// The processes a snapshot counts: the cluster's programs however they were started by it or by
// runc, and not others' builds of the same programs on this machine.
func TestClusterProcess(t *testing.T) {
	for argv0, want := range map[string]bool{
		"/root/.cache/memifnet/kube-build/bin/kubelet": true, "/usr/local/bin/memif-perf": true,
		"memif-deviceplugin": true, "/pause": true, "containerd-shim-runc-v2": true,
		os.TempDir() + "/memif-perf-test-1/memif-perf": false, "./memif-perf": false,
		"../_out/bin/memif-perf": false, "/usr/bin/bash": false,
	} {
		if got := clusterProcess(argv0); got != want {
			t.Errorf("clusterProcess(%q) = %v, want %v", argv0, got, want)
		}
	}
}
