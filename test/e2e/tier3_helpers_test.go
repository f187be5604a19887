//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/memifnet/memifnet/test/e2e/node"
)

// Helpers the tier-3 steps share: the RBAC diff of a service account, pod templates, the
// deletes a step registers to undo what it made, and the waits for a perf pair and a pod the
// scheduler refuses.

// canIRules is `kubectl auth can-i --list` for service account sa of memifnet-system in
// namespace ns (kubectl's default namespace when ns is empty), without the header: one rule a
// row, its columns joined by one space.
func (x *tier3) canIRules(ctx context.Context, t *testing.T, ns, sa string) []string {
	t.Helper()
	args := []string{"auth", "can-i", "--list", "--as=system:serviceaccount:" + t3Namespace + ":" + sa}
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	var rows []string
	for i, l := range strings.Split(strings.TrimSpace(x.kubectl(ctx, t, args...)), "\n") {
		if i > 0 { // the header
			rows = append(rows, strings.Join(strings.Fields(l), " "))
		}
	}
	return rows
}

// canI is what service account sa of memifnet-system may in namespace ns beyond the
// namespace's default service account (canIRules), sorted.
func (x *tier3) canI(ctx context.Context, t *testing.T, ns, sa string) []string {
	t.Helper()
	baseline := x.canIRules(ctx, t, ns, "default")
	var extra []string
	for _, r := range x.canIRules(ctx, t, ns, sa) {
		if !slices.Contains(baseline, r) {
			extra = append(extra, r)
		}
	}
	slices.Sort(extra)
	return extra
}

// mayOnly fails t (going on) unless service account sa of memifnet-system may exactly want
// (sorted) in namespace ns beyond what every service account may (canI), and returns what it
// may and whether that is want.
func (x *tier3) mayOnly(ctx context.Context, t *testing.T, ns, sa string, want []string) ([]string, bool) {
	t.Helper()
	extra := x.canI(ctx, t, ns, sa)
	if !slices.Equal(extra, want) {
		t.Errorf("%s/%s may, beyond every service account:\n  %s\nwant:\n  %s",
			t3Namespace, sa, strings.Join(extra, "\n  "), strings.Join(want, "\n  "))
		return extra, false
	}
	return extra, true
}

// undoWith registers kubectl commands that undo what a step made, run in order at its end
// (after its context is gone); each that fails fails the test.
func (x *tier3) undoWith(t *testing.T, cmds ...[]string) {
	t.Cleanup(func() {
		for _, args := range cmds {
			if out, err := x.c.KubectlCmd(context.Background(), args...).CombinedOutput(); err != nil {
				t.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	})
}

// claimPausePod is a pod of namespace default running the pause program with every device of
// resource claim claim, and nothing else.
func claimPausePod(name, claim string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  restartPolicy: Never
  automountServiceAccountToken: false
  resourceClaims: [{name: devices, resourceClaimName: %s}]
  containers:
    - name: c
      image: %s
      resources: {claims: [{name: devices}]}
`, name, claim, t3PauseImage)
}

// annotationOnly makes a perfPod (cluster.PerfPod) of port port say nothing about memifnet
// but annotation: the webhook adds the slots, the label and the affinity (and no pool unit: a
// zero-copy port's pool is the pod's own memory).
func annotationOnly(perfPod, port, annotation string) string {
	y := strings.Replace(perfPod, ", memifnet.io/socket: 1, memifnet.io/hugepool: 1", "", 1)
	return strings.Replace(y, `'[{"name":"`+port+`","link":"placeholder"}]'`, "'"+annotation+"'", 1)
}

// stopPerf ends running memif-perf pods of namespace default in order, each with SIGINT (it
// prints its summary and exits 0 when every byte checked), and waits for each to succeed.
func (x *tier3) stopPerf(ctx context.Context, t *testing.T, pods ...string) {
	t.Helper()
	for _, p := range pods {
		if err := syscall.Kill(x.containerPID(ctx, t, "default", p), syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		x.podSucceeded(ctx, t, "default", p, time.Minute)
	}
}

// receiving waits until the memif-perf receiver rx (namespace default) counts packets.
func (x *tier3) receiving(ctx context.Context, t *testing.T, rx string) {
	t.Helper()
	if err := node.Poll(ctx, 2*time.Minute, rx+" receiving", func() (bool, error) {
		return x.rxProgress(ctx, rx) > 0, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// unschedulableFor waits until pod (namespace default) is Pending with a PodScheduled condition
// whose message says want, and returns the message.
func (x *tier3) unschedulableFor(ctx context.Context, t *testing.T, pod, want string) string {
	t.Helper()
	var msg string
	if err := node.Poll(ctx, 60*time.Second, pod+" unschedulable", func() (bool, error) {
		p, err := x.cs.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				msg = c.Message
			}
		}
		return p.Status.Phase == corev1.PodPending && strings.Contains(msg, want), nil
	}); err != nil {
		t.Fatalf("%v (PodScheduled message %q)", err, msg)
	}
	return msg
}
