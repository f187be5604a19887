package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/memifnet/memifnet/test/e2e/node"
)

// Image is the memifnet image as the manifests name it after kustomize.
const Image = "ghcr.io/memifnet/memifnet:v0.1.0"

// PerfPod is the YAML of a pod (namespace default) running memif-perf --port on its one memif
// port on link, non-root with nothing but its slot and pool unit, requesting cpu (e.g. "200m") and
// allowed one core.
func PerfPod(name, port, link, cpu string, args ...string) string {
	quoted := make([]string, 0, len(args)+1)
	for _, a := range append([]string{"--port=" + port}, args...) {
		quoted = append(quoted, fmt.Sprintf("%q", a))
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  annotations:
    memifnet.io/ports: '[{"name":"%[2]s","link":"%[3]s"}]'
spec:
  restartPolicy: Never
  automountServiceAccountToken: false
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    seccompProfile: {type: RuntimeDefault}
  containers:
    - name: perf
      image: %[4]s
      command: ["/usr/local/bin/memif-perf"]
      args: [%[5]s]
      securityContext:
        allowPrivilegeEscalation: false
        readOnlyRootFilesystem: true
        capabilities: {drop: ["ALL"]}
      resources:
        requests: {cpu: %[6]s, memory: 64Mi}
        limits: {cpu: "1", memory: 64Mi, memifnet.io/socket: 1, memifnet.io/hugepool: 1}
`, name, port, link, Image, strings.Join(quoted, ", "), cpu)
}

// WaitPodSucceeded waits for pod namespace/name to end: nil when it Succeeded, an error naming
// the phase when it Failed or the timeout passed.
func (c *Cluster) WaitPodSucceeded(ctx context.Context, ns, name string, timeout time.Duration) error {
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	var phase corev1.PodPhase
	err = node.Poll(ctx, timeout, ns+"/"+name+" Succeeded", func() (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase = p.Status.Phase
		if phase == corev1.PodFailed {
			return false, fmt.Errorf("pod failed")
		}
		return phase == corev1.PodSucceeded, nil
	})
	if err != nil {
		return fmt.Errorf("%w (phase %s)", err, phase)
	}
	return nil
}

// Logs is `kubectl logs` of a pod's (first) container.
func (c *Cluster) Logs(ctx context.Context, ns, name string) (string, error) {
	out, err := c.KubectlCmd(ctx, "-n", ns, "logs", name).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("kubectl logs %s/%s: %v: %s", ns, name, err, out)
	}
	return string(out), nil
}
