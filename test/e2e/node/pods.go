package node

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/memifnet/memifnet/internal/names"
)

// PerfPod is a static pod running memif-perf --port on its one memif port (on link), as a
// non-root user with a read-only root filesystem and no capabilities, holding one slot and one
// pool unit.
func PerfPod(name, port, link string, args ...string) *corev1.Pod {
	no, yes, uid := false, true, int64(65532)
	lim := corev1.ResourceList{
		names.SocketResource:   resource.MustParse("1"),
		"memifnet.io/hugepool": resource.MustParse("1"),
		corev1.ResourceMemory:  resource.MustParse("64Mi"),
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
			Annotations: map[string]string{names.PortsAnnotation: `[{"name":"` + port + `","link":"` + link + `"}]`}},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: &no,
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &uid, RunAsNonRoot: &yes,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "perf", Image: Image, ImagePullPolicy: corev1.PullNever,
				Command:   []string{"/usr/local/bin/memif-perf"},
				Args:      append([]string{"--port", port, "--connect-timeout", "60s"}, args...),
				Resources: corev1.ResourceRequirements{Limits: lim},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
}

// WaitSandbox waits for the ready sandbox of static pod name and returns its ID.
func (s *Stack) WaitSandbox(ctx context.Context, name string) (string, error) {
	var id string
	err := Poll(ctx, 60*time.Second, "sandbox of "+name, func() (bool, error) {
		sbs, err := s.CRI.Sandboxes(ctx, name+"-"+NodeName)
		for _, sb := range sbs {
			if sb.State == cri.PodSandboxState_SANDBOX_READY {
				id = sb.Id
				return true, nil
			}
		}
		return false, err
	})
	return id, err
}

// WaitExited waits for container cname of a sandbox to exit; it returns the final status and
// the decoded log (also when the wait failed, for diagnosis).
func (s *Stack) WaitExited(ctx context.Context, sandboxID, cname string, timeout time.Duration) (*cri.ContainerStatus, string, error) {
	var st *cri.ContainerStatus
	err := Poll(ctx, timeout, "container "+cname+" exited", func() (bool, error) {
		var err error
		st, err = s.CRI.ContainerOf(ctx, sandboxID, cname)
		return err == nil && st.State == cri.ContainerState_CONTAINER_EXITED, err
	})
	var log string
	if st != nil {
		log, _ = Log(st)
	}
	return st, log, err
}

// PodSlots asks the kubelet's PodResources which slots static pod name holds.
func PodSlots(ctx context.Context, name string) ([]string, error) {
	ids, err := PodDevices(ctx, filepath.Join(names.KubeletDir, names.PodResourcesSocket), "default", name+"-"+NodeName, names.SocketResource)
	if err == nil && len(ids) == 0 {
		err = fmt.Errorf("pod %s holds no %s", name, names.SocketResource)
	}
	return ids, err
}

// HostilePod is a static pod that attacks its own slot with podsim's script: root in its
// container with the runtime's default capabilities (no CAP_SYS_ADMIN), its process namespace
// shared with the pause process so that it can end its own sandbox, restarted by the kubelet
// when it dies. It holds one slot for a host port.
func HostilePod(name, script string) *corev1.Pod {
	no, yes, root := false, true, int64(0)
	lim := corev1.ResourceList{names.SocketResource: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("32Mi")}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
			Annotations: map[string]string{names.PortsAnnotation: `[{"name":"west","peer":"host"}]`}},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyAlways,
			ShareProcessNamespace:        &yes,
			AutomountServiceAccountToken: &no,
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: &root,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "mallory", Image: Image, ImagePullPolicy: corev1.PullNever,
				Command:   []string{"/usr/local/bin/podsim", "-script", script},
				Resources: corev1.ResourceRequirements{Limits: lim},
			}},
		},
	}
}
