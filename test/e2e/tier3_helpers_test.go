//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Helpers the tier-3 steps share: the RBAC diff of a service account, pod templates, and the
// deletes a step registers to undo what it made.

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
