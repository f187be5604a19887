//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/memifnet/memifnet/test/e2e/node"
)

// t3UpgradeImage is the second build of the memifnet image: the same sources, linked with
// VERSION=v2 (the agent logs it), under another tag.
const (
	t3UpgradeImage   = "localhost/memifnet/memifnet:v2"
	t3UpgradeVersion = "v2"
)

// upgrade: the node agent of the DRA overlay (device plugin and DRA driver in one DaemonSet) is
// upgraded from the installed image to v2 (kubectl set image) while a link passes verified
// traffic; during the rollout a new device plugin link and a new DRA link are created. The old
// link never stops (the same containers, its counter rising every second, every byte
// verified), the new links pass verified traffic, the agent pod runs v2 and the node was not
// taken for an uninstall (memif-cni still chained and installed).
func (x *tier3) upgrade(ctx context.Context, t *testing.T) {
	x.buildUpgradeImage(ctx, t)
	x.kubectl(ctx, t, "apply", "-k", "manifests/overlays/dra/")
	x.kubectl(ctx, t, "-n", t3Namespace, "rollout", "status", t3DaemonSet, "--timeout=3m")
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		x.c.KubectlCmd(cctx, "delete", "job", "--ignore-not-found", "--cascade=foreground", "--wait=true", "--timeout=90s", "up-new-rx", "up-new-tx").Run()
		x.c.KubectlCmd(cctx, "delete", "pod", "--ignore-not-found", "--wait=true", "--timeout=90s", "up-rx", "up-tx", "up-dra-rx", "up-dra-tx").Run()
		x.c.KubectlCmd(cctx, "delete", "resourceclaim", "--ignore-not-found", "--wait=true", "--timeout=60s", "up-dra").Run()
		x.draRestore(cctx, t) // the chained install again, with the first image
	})
	x.startVerifiedPair(ctx, t, "up")
	containers := x.containerIDs(ctx, t, "up-rx", "up-tx")
	name, uid, _ := x.agentPod(ctx, t)
	x.logf("upgrade: up-rx/up-tx pass traffic; node agent %s runs the installed image", name)

	start := time.Now()
	x.kubectl(ctx, t, "-n", t3Namespace, "set", "image", t3DaemonSet, "deviceplugin="+t3UpgradeImage, "install-cni="+t3UpgradeImage)
	// The device plugin link as Jobs: the kubelet rejects a pod admitted while the agent is away
	// (see linkJob); the DRA link as bare pods: the kubelet retries their claims until the
	// driver is back.
	x.linkJob(ctx, t, perfPod("up-new-rx", "east", "up-new", "--mode=rx", "--verify", "--size=1500", "--duration=8s", "--connect-timeout=2m"))
	x.linkJob(ctx, t, perfPod("up-new-tx", "west", "up-new", "--mode=tx", "--verify", "--size=1500", "--duration=5s", "--connect-timeout=2m"))
	x.kubectlIn(ctx, t, draLinkClaim("up-dra")+
		"---\n"+draPerfPod("up-dra-rx", "up-dra", "east", "--mode=rx", "--verify", "--size=1500", "--duration=8s", "--connect-timeout=2m")+
		"---\n"+draPerfPod("up-dra-tx", "up-dra", "west", "--mode=tx", "--verify", "--size=1500", "--duration=5s", "--connect-timeout=2m"),
		"apply", "-f", "-")
	x.kubectl(ctx, t, "-n", t3Namespace, "rollout", "status", t3DaemonSet, "--timeout=3m")
	rolled := time.Since(start)
	name2, uid2, _ := x.agentPod(ctx, t)
	if uid2 == uid {
		t.Fatalf("the upgrade kept pod %s", name)
	}
	x.upgradedAgent(ctx, t, name2)
	x.logf("upgrade: node agent %s replaced by %s (%s) in %.1fs; the kubelet had no memifnet.io/socket plugin for %s, no DRA driver memifnet.io for %s",
		name, name2, t3UpgradeImage, rolled.Seconds(),
		x.kubeletGap(t, `"Device plugin disconnected" resource="memifnet.io/socket"`, `"Device plugin connected" resourceName="memifnet.io/socket"`),
		x.kubeletGap(t, `driverName="memifnet.io" endpoint="/var/lib/kubelet/plugins/memifnet.io/dra.sock" connected=false`, `driverName="memifnet.io" endpoint="/var/lib/kubelet/plugins/memifnet.io/dra.sock" connected=true`))

	x.jobDone(ctx, t, "up-new-tx")
	x.verified(ctx, t, "default", x.jobDone(ctx, t, "up-new-rx"))
	for _, p := range []string{"up-dra-tx", "up-dra-rx"} {
		x.podSucceeded(ctx, t, "default", p, 3*time.Minute)
	}
	x.verified(ctx, t, "default", "up-dra-rx")
	x.logf("upgrade: the device plugin link and the DRA link created during the rollout passed verified traffic")

	x.trafficFlows(ctx, t, "up-rx", "after the upgrade")
	// Read before the sender stops (the receiver then counts nothing until it is stopped too).
	stall, seconds := longestStall(x.logs(ctx, "default", "up-rx"))
	if got := x.containerIDs(ctx, t, "up-rx", "up-tx"); !slices.Equal(got, containers) {
		t.Fatalf("the old link's containers changed: %q, before %q", got, containers)
	}
	x.stopPerf(ctx, t, "up-tx", "up-rx")
	sum := x.verified(ctx, t, "default", "up-rx")
	if stall > 1 {
		t.Errorf("the old link's receiver counted no packet for %d consecutive seconds (of %d)", stall, seconds)
	}
	x.logf("upgrade: the old link passed %.0f verified packets; its counter rose in each of its %d progress seconds (longest stall %ds, rollout %.1fs)",
		sum["rx_pkts"], seconds, stall, rolled.Seconds())
	x.kubectl(ctx, t, "delete", "job", "up-new-rx", "up-new-tx", "--cascade=foreground", "--wait=true", "--timeout=2m")
	x.kubectl(ctx, t, "delete", "pod", "up-dra-rx", "up-dra-tx", "up-rx", "up-tx", "--wait=true", "--timeout=2m")
	x.kubectl(ctx, t, "delete", "resourceclaim", "up-dra", "--wait=true", "--timeout=2m")
}

// buildUpgradeImage builds the v2 image (make image with another tag and VERSION, into its own
// output dir) and imports it into the cluster's containerd.
func (x *tier3) buildUpgradeImage(ctx context.Context, t *testing.T) {
	t.Helper()
	out := t.TempDir()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "image",
		"E2E_OUT="+out, "IMAGE="+t3UpgradeImage, "VERSION="+t3UpgradeVersion, "PAUSE_IMAGE=localhost/memifnet/pause:v2")
	cmd.Dir = x.repo
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image (v2): %v\n%s", err, b)
	}
	if err := x.c.ImportImage(ctx, filepath.Join(out, "memifnet-image.tar")); err != nil {
		t.Fatal(err)
	}
	x.logf("upgrade: %s built (VERSION=%s) and imported", t3UpgradeImage, t3UpgradeVersion)
}

// upgradedAgent checks the new agent pod: both containers from the v2 image, its log naming
// version v2, and the node kept as on a restart (an uninstall removes memif-cni from the
// conflist and the CNI bin dir).
func (x *tier3) upgradedAgent(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	p, err := x.cs.CoreV1().Pods(t3Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
		if c.Image != t3UpgradeImage {
			t.Errorf("agent pod %s: container %s runs %s, want %s", name, c.Name, c.Image, t3UpgradeImage)
		}
	}
	if log := x.logs(ctx, t3Namespace, name); !strings.Contains(log, `"version":"`+t3UpgradeVersion+`"`) {
		t.Errorf("agent pod %s does not log version %s:\n%s", name, t3UpgradeVersion, log)
	}
	if types := x.conflistTypes(t); !slices.Equal(types, []string{"bridge", "memif-cni"}) {
		t.Errorf("after the upgrade the conflist chains %q: taken for an uninstall?", types)
	}
	if _, err := os.Stat(filepath.Join(x.c.Paths.CNIBinDir, "memif-cni")); err != nil {
		t.Errorf("after the upgrade: %v: taken for an uninstall?", err)
	}
}

// linkJob runs a memif-perf pod (perfPod's) as a Job. A pod the kubelet admits while the node
// agent is away (between the old pod's stop and the new one's registration) is rejected with
// UnexpectedAdmissionError, as with every device plugin (the kubelet marks a disconnected
// plugin's devices unhealthy and never retries the admission of a bare pod:
// kubernetes/kubernetes#119248, #109595); a workload controller replaces it.
func (x *tier3) linkJob(ctx context.Context, t *testing.T, podYAML string) {
	t.Helper()
	var p corev1.Pod
	if err := yaml.UnmarshalStrict([]byte(podYAML), &p); err != nil {
		t.Fatal(err)
	}
	backoff := int32(3)
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: "default"},
		Spec: batchv1.JobSpec{BackoffLimit: &backoff, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: p.Annotations, Labels: p.Labels},
			Spec:       p.Spec,
		}},
	}
	if _, err := x.cs.BatchV1().Jobs("default").Create(ctx, j, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// jobDone waits for a linkJob to complete and returns its pod that succeeded. Its pods that
// failed must all be the kubelet's admission rejections.
func (x *tier3) jobDone(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	var pods *corev1.PodList
	var done string
	if err := node.Poll(ctx, 3*time.Minute, "Job "+name+" complete", func() (bool, error) {
		var err error
		pods, err = x.cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + name})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodSucceeded {
				done = p.Name
			}
		}
		return done != "", nil
	}); err != nil {
		t.Fatalf("%v: pods %+v", err, pods)
	}
	rejected := 0
	for _, p := range pods.Items {
		switch {
		case p.Status.Phase != corev1.PodFailed:
		case p.Status.Reason == "UnexpectedAdmissionError":
			rejected++
		default:
			t.Errorf("Job %s: pod %s failed: %s %s; logs:\n%s", name, p.Name, p.Status.Reason, p.Status.Message, x.logs(ctx, "default", p.Name))
		}
	}
	x.logf("upgrade: Job %s: pod %s succeeded; %d pod(s) before it rejected at admission while the agent was away", name, done, rejected)
	return done
}

// kubeletGap measures, from the kubelet's log, the time from the last line containing down to
// the first line after it containing up (klog's timestamps, microseconds).
func (x *tier3) kubeletGap(t *testing.T, down, up string) time.Duration {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(x.c.LogDir(), "kubelet.log"))
	if err != nil {
		t.Fatal(err)
	}
	var from, to time.Time
	for _, l := range strings.Split(string(b), "\n") {
		if len(l) < 21 {
			continue
		}
		switch at, err := time.Parse("0102 15:04:05.000000", l[1:21]); {
		case err != nil:
		case strings.Contains(l, down):
			from, to = at, time.Time{}
		case strings.Contains(l, up) && !from.IsZero() && to.IsZero():
			to = at
		}
	}
	if from.IsZero() || to.IsZero() {
		t.Fatalf("kubelet log: no %q followed by %q", down, up)
	}
	if to.Before(from) { // past midnight
		to = to.Add(24 * time.Hour)
	}
	return to.Sub(from).Round(time.Millisecond)
}

// containerIDs are the running containers of pods (namespace default), as the kubelet reports.
func (x *tier3) containerIDs(ctx context.Context, t *testing.T, pods ...string) []string {
	t.Helper()
	var ids []string
	for _, name := range pods {
		// The kubelet posts a started container's status on its own schedule: a sender may be
		// sending (its receiver has counted packets) while the API still says ContainerCreating.
		var p *corev1.Pod
		err := node.Poll(ctx, time.Minute, "pod "+name+" reporting one running container", func() (bool, error) {
			var err error
			p, err = x.cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			return err == nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil, err
		})
		if err != nil {
			t.Fatalf("%v: %+v", err, p)
		}
		ids = append(ids, p.Status.ContainerStatuses[0].ContainerID)
	}
	return ids
}

// longestStall reads a memif-perf receiver's progress lines (one a second, rx_pkts cumulative)
// and returns the most consecutive seconds without a new packet once packets flow, and how many
// seconds it read from then.
func longestStall(log string) (int, int) {
	var last float64 = -1
	longest, run, seconds := 0, 0, 0
	for _, l := range strings.Split(log, "\n") {
		if !strings.HasPrefix(l, "[") || !strings.Contains(l, "rx_pkts=") {
			continue
		}
		rx := node.LastProgressRx(l)
		if last > 0 {
			seconds++
			if rx > last {
				run = 0
			} else if run++; run > longest {
				longest = run
			}
		}
		last = rx
	}
	return longest, seconds
}
