package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/test/e2e/node"
)

// Clients of the API server with certificates from the cluster CA: file name, user, groups.
var clients = []client{
	{"admin", "memifnet-cluster-admin", []string{"system:masters"}},
	{"controller-manager", "system:kube-controller-manager", nil},
	{"scheduler", "system:kube-scheduler", nil},
	{"kubelet", "system:node:" + NodeName, []string{"system:nodes"}},
	// The API server's client certificate towards the kubelet (logs, exec): bound to
	// system:kubelet-api-admin below, as kubeadm does.
	{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", nil},
	// Multus's identity when the e2e installs it (InstallMultus).
	{"multus", "memifnet-cluster:multus", nil},
}

func (c *Cluster) pki() PKI { return PKI{Dir: c.Path("pki")} }

func (c *Cluster) server() string { return "https://127.0.0.1:" + strconv.Itoa(APIServerPort) }

// writePKI generates the CA, every certificate and the service-account keys, and a kubeconfig
// per client.
func (c *Cluster) writePKI(context.Context) error {
	if err := generatePKI(c.pki().Dir, NodeName, net.ParseIP(ServiceIP), clients); err != nil {
		return err
	}
	for _, cl := range clients {
		if cl.file == "apiserver-kubelet-client" {
			continue
		}
		kc, err := kubeconfig(c.pki(), c.server(), cl.file)
		if err != nil {
			return err
		}
		if err := os.WriteFile(c.Path(cl.file+".kubeconfig"), kc, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) kube(name string) string { return filepath.Join(c.In.KubeDir, name) }

func (c *Cluster) start(name string, env []string, args ...string) (*Daemon, error) {
	d, err := startDaemon(name, filepath.Join(c.LogDir(), name+".log"), env, args...)
	if err != nil {
		return nil, err
	}
	return d, c.addDaemon(d)
}

// waitHTTP polls url (over TLS with the admin certificate for https) until it answers 200 with
// a body containing want, or the daemon ends.
func (c *Cluster) waitHTTP(ctx context.Context, d *Daemon, url, want string, timeout time.Duration) error {
	hc, err := c.httpClient()
	if err != nil {
		return err
	}
	return node.Poll(ctx, timeout, d.Name+" "+url, func() (bool, error) {
		if !d.Alive() {
			return false, fmt.Errorf("%s exited (see %s)", d.Name, d.Log)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := hc.Do(req)
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			return false, fmt.Errorf("%s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(b)))
		}
		return true, nil
	})
}

func (c *Cluster) httpClient() (*http.Client, error) {
	caPEM, err := os.ReadFile(c.pki().Path("ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair(c.pki().Path("admin.crt"), c.pki().Path("admin.key"))
	if err != nil {
		return nil, err
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}},
	}}, nil
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	d, err := c.start("etcd", nil, c.kube("etcd"),
		"--name=memifnet", "--data-dir="+c.Path("etcd"),
		"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=memifnet=http://127.0.0.1:2380", "--listen-metrics-urls=http://127.0.0.1:2381",
		// A throwaway test cluster: losing the last writes in a machine crash is fine, and
		// fsync on a shared VM disk is what makes etcd slow.
		"--unsafe-no-fsync", "--log-level=warn")
	if err != nil {
		return err
	}
	return c.waitHTTP(ctx, d, "http://127.0.0.1:2379/health", `"health":"true"`, 60*time.Second)
}

// auditPolicy records every request of memifnet's service accounts (the node agent's and the
// webhook's) and the node's reads of single pods (memif-cni under Multus reads with the kubelet's
// credentials; its User-Agent tells it from the kubelet) in AuditLog, and nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts:memifnet-system"]
  - level: Metadata
    users: ["system:node:` + NodeName + `"]
    verbs: ["get"]
    resources: [{group: "", resources: ["pods"]}]
  - level: None
`

// AuditLog is the API server's audit log (JSON lines, audit.k8s.io/v1 Events) of the requests of
// the memifnet-system service accounts.
func (c *Cluster) AuditLog() string { return filepath.Join(c.LogDir(), "audit.log") }

func (c *Cluster) startAPIServer(ctx context.Context) error {
	p := c.pki().Path
	if err := os.WriteFile(c.Path("audit-policy.yaml"), []byte(auditPolicy), 0o644); err != nil {
		return err
	}
	d, err := c.start("kube-apiserver", nil, c.kube("kube-apiserver"),
		"--audit-policy-file="+c.Path("audit-policy.yaml"), "--audit-log-path="+c.AuditLog(),
		"--etcd-servers=http://127.0.0.1:2379",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(APIServerPort),
		"--tls-cert-file="+p("apiserver.crt"), "--tls-private-key-file="+p("apiserver.key"),
		"--client-ca-file="+p("ca.crt"),
		"--service-cluster-ip-range="+ServiceCIDR,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+p("sa.pub"), "--service-account-signing-key-file="+p("sa.key"),
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--kubelet-client-certificate="+p("apiserver-kubelet-client.crt"),
		"--kubelet-client-key="+p("apiserver-kubelet-client.key"),
		"--kubelet-certificate-authority="+p("ca.crt"),
		"--kubelet-preferred-address-types=InternalIP",
		// The `kubernetes` Service's endpoints would be the advertised address, which may not be
		// a loopback one; nothing reads them here (no kube-proxy: see prepareHost).
		"--endpoint-reconciler-type=none",
		// Webhooks (and aggregated APIs) are called at an endpoint's pod IP, not the Service's
		// ClusterIP: there is no kube-proxy to route ClusterIPs.
		"--enable-aggregator-routing=true",
		"--profiling=false", "--v=1")
	if err != nil {
		return err
	}
	if err := c.waitHTTP(ctx, d, c.server()+"/readyz", "ok", 120*time.Second); err != nil {
		return err
	}
	// The API server reaches the kubelet (logs, exec) with its own client certificate; the
	// kubelet asks the API server whether that user may (webhook authorization).
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "memifnet-cluster:apiserver-kubelet-client"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "kube-apiserver-kubelet-client"}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func (c *Cluster) startControllerManager(ctx context.Context) error {
	kc := c.Path("controller-manager.kubeconfig")
	d, err := c.start("kube-controller-manager", nil, c.kube("kube-controller-manager"),
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--bind-address=127.0.0.1", "--secure-port=10257",
		"--tls-cert-file="+c.pki().Path("controller-manager-serving.crt"),
		"--tls-private-key-file="+c.pki().Path("controller-manager-serving.key"),
		"--service-account-private-key-file="+c.pki().Path("sa.key"),
		// Published in every namespace as the kube-root-ca.crt ConfigMap (projected tokens).
		"--root-ca-file="+c.pki().Path("ca.crt"),
		"--use-service-account-credentials=true",
		"--leader-elect=false", "--v=1")
	if err != nil {
		return err
	}
	return c.waitHTTP(ctx, d, "https://127.0.0.1:10257/healthz", "ok", 60*time.Second)
}

func (c *Cluster) startScheduler(ctx context.Context) error {
	kc := c.Path("scheduler.kubeconfig")
	d, err := c.start("kube-scheduler", nil, c.kube("kube-scheduler"),
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--bind-address=127.0.0.1", "--secure-port=10259",
		"--tls-cert-file="+c.pki().Path("scheduler-serving.crt"),
		"--tls-private-key-file="+c.pki().Path("scheduler-serving.key"),
		"--leader-elect=false", "--v=1")
	if err != nil {
		return err
	}
	return c.waitHTTP(ctx, d, "https://127.0.0.1:10259/healthz", "ok", 60*time.Second)
}

// containerdConfig is containerd v2's configuration (version 4): every path under dir (sockets,
// shim sockets, runc's state, network namespaces), no imported host configuration, CRI with runc
// (cgroupfs: this host has cgroup v1 and no systemd), the CDI spec dirs, the pause image built
// (`make image`) as the sandbox image, and the node's CNI directories.
func containerdConfig(dir, pauseImage string, p Paths) string {
	return fmt.Sprintf(`version = 4
root = %[1]q
state = %[2]q
imports = []

[plugins.'io.containerd.server.v1.grpc']
  address = %[3]q

[plugins.'io.containerd.server.v1.ttrpc']
  address = %[4]q

[plugins.'io.containerd.shim.v1.manager']
  socket_dir = %[5]q

[plugins.'io.containerd.internal.v1.opt']
  path = %[6]q

[plugins.'io.containerd.nri.v1.nri']
  disable = true

[plugins.'io.containerd.cri.v1.runtime']
  # Needed where root lacks CAP_SYS_RESOURCE (VMs, nested containers): without it runc cannot
  # apply the sandbox's oom_score_adj and every RunPodSandbox fails.
  restrict_oom_score_adj = true
  # CDI is always on in containerd 2; these are the standard spec directories.
  cdi_spec_dirs = ['/etc/cdi', '/var/run/cdi']
  netns_mounts_under_state_dir = true

  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'

    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'

      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[7]q

  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%[8]q]
    conf_dir = %[9]q
    max_conf_num = 1

[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'

  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[10]q

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = '127.0.0.1'
  stream_server_port = '0'
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), filepath.Join(dir, "containerd.sock"),
		filepath.Join(dir, "containerd.sock.ttrpc"), filepath.Join(dir, "s"), filepath.Join(dir, "opt"),
		filepath.Join(dir, "runc"), p.CNIBinDir, p.CNIConfDir, pauseImage)
}

func (c *Cluster) startContainerd(ctx context.Context) error {
	if err := os.MkdirAll(c.Path("containerd"), 0o755); err != nil {
		return err
	}
	pause, err := tarballTag(c.In.PauseImage)
	if err != nil {
		return err
	}
	if err := os.WriteFile(c.Path("containerd", "config.toml"), []byte(containerdConfig(c.Path("containerd"), pause, c.Paths)), 0o644); err != nil {
		return err
	}
	// containerd finds its shim on PATH: ours (v2) before any other (Debian's 1.6).
	env := []string{"PATH=" + c.In.ContainerdDir + ":" + os.Getenv("PATH")}
	d, err := c.start("containerd", env, filepath.Join(c.In.ContainerdDir, "containerd"),
		"--config", c.Path("containerd", "config.toml"))
	if err != nil {
		return err
	}
	return waitCRI(ctx, d, c.ContainerdSock())
}

// kubeletConfig is the KubeletConfiguration of a cluster member (node.KubeletTLS), with a serving
// certificate from the cluster CA.
func (c *Cluster) kubeletConfig() string {
	p := c.pki().Path
	return node.KubeletConfig{ContainerdSock: c.ContainerdSock(), TLS: &node.KubeletTLS{
		CertFile: p("kubelet-serving.crt"), KeyFile: p("kubelet-serving.key"), ClientCAFile: p("ca.crt"),
	}}.YAML()
}

func (c *Cluster) startKubelet(ctx context.Context) error {
	if err := os.MkdirAll(c.Path("kubelet"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(c.Path("kubelet", "config.yaml"), []byte(c.kubeletConfig()), 0o644); err != nil {
		return err
	}
	// The kubelet's kubeconfig where the distribution keeps it (memif-cni reads it under Multus);
	// prepareHost made its directory.
	kc, err := os.ReadFile(c.Path("kubelet.kubeconfig"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(c.Paths.KubeletKubeconfig, kc, 0o600); err != nil {
		return err
	}
	if _, err := c.start("kubelet", nil, c.kube("kubelet"),
		"--config="+c.Path("kubelet", "config.yaml"), "--kubeconfig="+c.Paths.KubeletKubeconfig,
		"--root-dir="+names.KubeletDir, "--hostname-override="+NodeName,
		"--containerd="+c.ContainerdSock(), "--v=2"); err != nil {
		return err
	}
	return c.waitNodeReady(ctx, NodeName, "kubelet", 120*time.Second)
}

// waitNodeReady waits for node name, whose kubelet is daemon kubelet, to be registered and Ready.
func (c *Cluster) waitNodeReady(ctx context.Context, name, kubelet string, timeout time.Duration) error {
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	return node.Poll(ctx, timeout, "node "+name+" Ready", func() (bool, error) {
		if d := c.Daemon(kubelet); d != nil && !d.Alive() {
			return false, fmt.Errorf("%s exited (see %s)", kubelet, d.Log)
		}
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status == corev1.ConditionTrue {
					return true, nil
				}
				return false, fmt.Errorf("node not ready: %s", cond.Message)
			}
		}
		return false, fmt.Errorf("node has no Ready condition yet")
	})
}

// Clientset is a client-go clientset with the admin credentials.
func (c *Cluster) Clientset() (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

func jsonIndent(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	return append(b, '\n'), err
}
