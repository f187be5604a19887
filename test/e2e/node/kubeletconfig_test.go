package node

import (
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

// The two configurations as the standalone and the cluster kubelet had them before they shared
// KubeletConfig: each must read the same, key for key and value for value.
const (
	standaloneBefore = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: /s/kubelet/manifests
fileCheckFrequency: 1s
syncFrequency: 10s
containerRuntimeEndpoint: unix:///s/containerd.sock
imageServiceEndpoint: unix:///s/containerd.sock
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
resolvConf: /etc/resolv.conf
registerNode: false
`
	clusterBefore = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix:///c/containerd.sock
imageServiceEndpoint: unix:///c/containerd.sock
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: /c/pki/kubelet-serving.crt
tlsPrivateKeyFile: /c/pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: /c/pki/ca.crt}
authorization: {mode: Webhook}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
resolvConf: /etc/resolv.conf
registerNode: true
syncFrequency: 10s
`
)

func TestKubeletConfig(t *testing.T) {
	for _, c := range []struct {
		name, before string
		cfg          KubeletConfig
	}{
		{"standalone", standaloneBefore, KubeletConfig{ContainerdSock: "/s/containerd.sock", StaticPodDir: "/s/kubelet/manifests"}},
		{"cluster", clusterBefore, KubeletConfig{ContainerdSock: "/c/containerd.sock", TLS: &KubeletTLS{
			CertFile: "/c/pki/kubelet-serving.crt", KeyFile: "/c/pki/kubelet-serving.key", ClientCAFile: "/c/pki/ca.crt"}}},
	} {
		var want, got map[string]any
		if err := yaml.UnmarshalStrict([]byte(c.before), &want); err != nil {
			t.Fatalf("%s before: %v", c.name, err)
		}
		if err := yaml.UnmarshalStrict([]byte(c.cfg.YAML()), &got); err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, c.cfg.YAML())
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got\n%+v\nwant\n%+v", c.name, got, want)
		}
	}
}
