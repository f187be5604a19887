package cluster

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The layouts: node 1 as a one-node cluster has it; of three or more the last is a control-plane
// node without hugepages or memifnet; the hugepages raised cover every memifnet node's pools.
func TestLayout(t *testing.T) {
	one := Layout(1)
	if len(one) != 1 || one[0].Name != NodeName || !one[0].Memifnet || one[0].Profile != "" || one[0].ControlPlane {
		t.Errorf("one node: %+v", one)
	}
	if got := HugepagesNeeded(one); got != 160 {
		t.Errorf("one node needs %d hugepages, want 160 (as before nodes)", got)
	}
	three := Layout(3)
	if len(three) != 3 {
		t.Fatalf("%+v", three)
	}
	n2, n3 := three[1], three[2]
	if n2.Name != "10.250.0.2" || !n2.Memifnet || n2.Profile != "small" || n2.HugepagePages < smallProfilePages || n2.ControlPlane {
		t.Errorf("node 2: %+v", n2)
	}
	if n3.Name != "10.250.0.3" || n3.Memifnet || n3.HugepagePages != 0 || !n3.ControlPlane {
		t.Errorf("node 3: %+v", n3)
	}
	if got, want := HugepagesNeeded(three), pageMargin+defaultProfilePages+smallProfilePages; got != want {
		t.Errorf("three nodes need %d hugepages, want %d", got, want)
	}
	if two := Layout(2); two[1].ControlPlane || !two[1].Memifnet {
		t.Errorf("two nodes: node 2 %+v, want a memifnet worker", two[1])
	}
	if nodePodSubnet(1) != PodSubnet || nodePodBridge(1) != Bridge || nodePodGateway(1) != BridgeIP {
		t.Errorf("node 1's pod network by the node formulas: %s %s %s", nodePodSubnet(1), nodePodBridge(1), nodePodGateway(1))
	}
}

// A node's holder mounts its own view of every node-local path and of the hugepages, and only
// then says it is ready.
func TestHolderScript(t *testing.T) {
	c := New("/repo", "/run/b", Inputs{}, nil)
	nodes := Layout(3)
	s2 := c.holderScript(nodes[1])
	for _, p := range c.NodePaths() {
		bind := `mount --bind "/run/b/nodes/2/root` + p + `" "` + p + `"`
		if !strings.Contains(s2, bind+"\nmount --make-shared \""+p+"\"\n") {
			t.Errorf("node 2 does not bind %s and make it shared:\n%s", p, s2)
		}
	}
	for _, want := range []string{"mount -t sysfs sysfs /sys\n", "/sys/fs/cgroup\n",
		"echo 96 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages\n",
		"mount -t hugetlbfs -o pagesize=2M,size=201326592 memifnet-node2 /dev/hugepages\n"} {
		if !strings.Contains(s2, want) {
			t.Errorf("node 2's holder lacks %q:\n%s", want, s2)
		}
	}
	if !strings.HasSuffix(s2, "touch \"/run/b/nodes/2/holder-ready\"\nexec sleep infinity\n") {
		t.Errorf("node 2's holder does not end ready and asleep:\n%s", s2)
	}
	s3 := c.holderScript(nodes[2])
	if strings.Contains(s3, "hugetlbfs") || strings.Contains(s3, "hugepages-2048kB") {
		t.Errorf("node 3 (no hugepages) has some:\n%s", s3)
	}
}

// A node's kubelet certificates come from the cluster CA with the node's identity and address,
// and its kubeconfig names the `kubernetes` Service.
func TestNodeCredentials(t *testing.T) {
	base := t.TempDir()
	c := New("/repo", base, Inputs{}, nil)
	if err := generatePKI(c.pki().Dir, NodeName, net.ParseIP(ServiceIP), clients); err != nil {
		t.Fatal(err)
	}
	s := Layout(2)[1]
	if err := os.MkdirAll(c.NodeRoot(2, filepath.Dir(c.Paths.KubeletKubeconfig)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.writeNodeCredentials(s); err != nil {
		t.Fatal(err)
	}
	ca, err := loadCA(c.pki())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	read := func(name string) *x509.Certificate {
		b, err := os.ReadFile(c.pki().Path(name + ".crt"))
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		crt, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return crt
	}
	client := read("node2-kubelet")
	if client.Subject.CommonName != "system:node:10.250.0.2" || strings.Join(client.Subject.Organization, ",") != "system:nodes" {
		t.Errorf("node 2 client certificate: %v", client.Subject)
	}
	if _, err := client.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("node 2 client certificate: %v", err)
	}
	if _, err := read("node2-kubelet-serving").Verify(x509.VerifyOptions{DNSName: "10.250.0.2", Roots: roots}); err != nil {
		t.Errorf("node 2 serving certificate for 10.250.0.2: %v", err)
	}
	if _, err := read("node2-kubelet-serving").Verify(x509.VerifyOptions{DNSName: NodeName, Roots: roots}); err == nil {
		t.Error("node 2 serving certificate verifies for node 1's address")
	}
	kc, err := os.ReadFile(c.NodeRoot(2, c.Paths.KubeletKubeconfig))
	if err != nil || !strings.Contains(string(kc), "server: https://10.96.0.1:443") {
		t.Errorf("node 2 kubeconfig: %v\n%s", err, kc)
	}
}
