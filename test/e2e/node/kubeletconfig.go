package node

import (
	"cmp"
	"fmt"
	"strings"
)

// KubeletConfig is the KubeletConfiguration of both e2e kubelets (this package's standalone one
// and the cluster's): containerd's CRI, cgroupfs on cgroup v1, serving on 127.0.0.1, no image
// garbage collection (nothing can be pulled again), eviction only when nearly out of room.
type KubeletConfig struct {
	ContainerdSock string
	// StaticPodDir, if set, is where the kubelet finds static pods (checked every second).
	StaticPodDir string
	// TLS, if set, is a cluster member's: it serves with a certificate from the cluster CA,
	// authenticates clients by that CA or by token (webhook), lets the API server authorize them,
	// and registers its node. Without it (standalone: no API server) anyone on 127.0.0.1 may
	// call it and it registers nothing.
	TLS *KubeletTLS
	// Address is where the kubelet serves (default 127.0.0.1): a node of a multi-node cluster
	// serves on its own address, in its own network namespace.
	Address string
	// CgroupRoot, if set, is the parent cgroup of the kubelet's pods (a node that shares the
	// machine with others keeps its pods under a root of its own).
	CgroupRoot string
}

// KubeletTLS are a cluster kubelet's serving certificate and key and its client CA.
type KubeletTLS struct {
	CertFile, KeyFile, ClientCAFile string
}

// YAML is the configuration file (kubelet --config).
func (k KubeletConfig) YAML() string {
	var b strings.Builder
	b.WriteString("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n")
	if k.StaticPodDir != "" {
		fmt.Fprintf(&b, "staticPodPath: %s\nfileCheckFrequency: 1s\n", k.StaticPodDir)
	}
	fmt.Fprintf(&b, `syncFrequency: 10s
containerRuntimeEndpoint: unix://%[1]s
imageServiceEndpoint: unix://%[1]s
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
address: %[2]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
resolvConf: /etc/resolv.conf
`, k.ContainerdSock, cmp.Or(k.Address, "127.0.0.1"))
	if k.CgroupRoot != "" {
		fmt.Fprintf(&b, "cgroupRoot: %s\n", k.CgroupRoot)
	}
	if k.TLS == nil {
		b.WriteString(`authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
registerNode: false
`)
		return b.String()
	}
	fmt.Fprintf(&b, `tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
registerNode: true
`, k.TLS.CertFile, k.TLS.KeyFile, k.TLS.ClientCAFile)
	return b.String()
}
