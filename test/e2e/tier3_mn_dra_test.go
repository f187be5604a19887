//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/test/e2e/cluster"
	"github.com/memifnet/memifnet/test/e2e/node"
)

// DRA on several nodes (issue 33 part 3), a step of TestTier3MultiNode.

// mnDRADevices is what each profile's DRA driver publishes under the DRA overlay
// (manifests/overlays/dra/deviceplugin-config-dra.yaml): socket slots and drapool units.
var mnDRADevices = map[string][2]int{"": {t3DRASlots, t3DRAUnits}, "small": {4, 1}}

// mnDRA: `kubectl apply -k manifests/overlays/dra/` over the running install runs the DRA driver
// on both memifnet nodes: one ResourceSlice per memifnet node, its pool named after the node,
// none for node 3 (mnDRASlices). Ten links asked for by shared claims, created at once, each
// allocated on one node with both pods there, over both memifnet nodes, every end verified
// (mnDRALinks). Each node's agent, with the token the kubelet projected into its pod, can write
// its own node's slice and its own node's claim status, and neither the other node's
// (mnDRAAgents). The chained install is then put back, as the next steps expect.
func (x *tier3) mnDRA(ctx context.Context, t *testing.T, nodes []cluster.NodeSpec) {
	dss := []string{t3DaemonSet, t3DaemonSet + "-small"}
	x.kubectl(ctx, t, "apply", "-k", "manifests/overlays/dra/")
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		x.mnDRARestore(cctx, t, nodes, dss)
	})
	for _, ds := range dss {
		x.kubectl(ctx, t, "-n", t3Namespace, "rollout", "status", ds, "--timeout=3m")
	}
	x.logf("dra: overlay applied, both agents rolled out with the DRA driver")
	x.mnDRASlices(ctx, t, nodes)
	x.mnDRALinks(ctx, t, nodes)
	x.mnDRAAgents(ctx, t, nodes)
}

// mnDRARestore deletes the step's pods and claims and puts the chained install back: both
// agents without the driver, their slots and units offered again, no ResourceSlice left.
func (x *tier3) mnDRARestore(ctx context.Context, t *testing.T, nodes []cluster.NodeSpec, dss []string) {
	for _, args := range [][]string{
		{"delete", "pods", "--all", "-n", "default", "--wait=true", "--timeout=90s"},
		{"delete", "resourceclaims", "--all", "-n", "default", "--wait=true", "--timeout=60s"},
	} {
		if out, err := x.c.KubectlCmd(ctx, args...).CombinedOutput(); err != nil {
			t.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	x.draPutBack(ctx, t, dss...)
	x.allocatable(ctx, t, nodes[0].Name, 64, 4)
	x.allocatable(ctx, t, nodes[1].Name, 32, 2)
	x.mnDRAPluginDirsGone(ctx, t, nodes)
	x.logf("dra: chained install back on both nodes, no ResourceSlice left")
}

// mnDRAPluginDirsGone removes, as docs/dra.md tells an operator going back from the DRA overlay,
// the kubelet plugin directory the driver leaves on each memifnet node (the agent without the
// driver does not mount it); it must be empty: the stopped driver removed its sockets. Ops then
// finds every node as before the install.
func (x *tier3) mnDRAPluginDirsGone(ctx context.Context, t *testing.T, nodes []cluster.NodeSpec) {
	for _, n := range nodes {
		if !n.Memifnet {
			continue
		}
		dir := filepath.Join(names.KubeletDir, "plugins", names.DRADriver)
		if n.Index != 1 {
			dir = x.c.NodeRoot(n.Index, dir)
		}
		var last error
		err := node.Poll(ctx, 30*time.Second, "the driver's plugin dir empty on "+n.Name, func() (bool, error) {
			last = os.Remove(dir)
			return last == nil || errors.Is(last, fs.ErrNotExist), nil
		})
		if err != nil {
			t.Errorf("node %s: %s after the driver stopped: %v (%v)", n.Name, dir, err, last)
		}
	}
}

// mnDRASlices waits until the memifnet.io ResourceSlices are one per memifnet node, in the pool
// named after it, with its profile's devices, and none on any other node.
func (x *tier3) mnDRASlices(ctx context.Context, t *testing.T, nodes []cluster.NodeSpec) {
	var got []string
	err := node.Poll(ctx, 2*time.Minute, "one memifnet.io ResourceSlice per memifnet node", func() (bool, error) {
		sl, err := x.cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + names.DRADriver})
		if err != nil {
			return false, err
		}
		got = got[:0]
		per := map[string]int{}
		ok := true
		for _, s := range sl.Items {
			n, kinds := "", map[string]int{}
			if s.Spec.NodeName != nil {
				n = *s.Spec.NodeName
			}
			for _, d := range s.Spec.Devices {
				if typ := d.Attributes["type"].StringValue; typ != nil {
					kinds[*typ]++
				}
			}
			got = append(got, fmt.Sprintf("%s: node %q pool %q of %d slices, devices %v", s.Name, n, s.Spec.Pool.Name, s.Spec.Pool.ResourceSliceCount, kinds))
			per[n]++
			want, memifnet := mnDRAWant(nodes, n)
			ok = ok && memifnet && s.Spec.Pool.Name == n && s.Spec.Pool.ResourceSliceCount == 1 &&
				kinds["socket"] == want[0] && kinds["hugepage"] == want[1]
		}
		for _, n := range nodes {
			ok = ok && per[n.Name] == map[bool]int{true: 1, false: 0}[n.Memifnet]
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%v:\n  %s", err, strings.Join(got, "\n  "))
	}
	x.logf("dra: ResourceSlices:\n  %s", strings.Join(got, "\n  "))
}

// mnDRAWant is the socket slots and units node n's driver publishes, and whether it runs one.
func mnDRAWant(nodes []cluster.NodeSpec, n string) ([2]int, bool) {
	for _, s := range nodes {
		if s.Name == n && s.Memifnet {
			return mnDRADevices[s.Profile], true
		}
	}
	return [2]int{}, false
}

// mnDRAPod is draPerfPod small enough for many at once on two cores, on nodeName if not "".
func mnDRAPod(name, claim, request, nodeName string, args ...string) string {
	y := strings.Replace(draPerfPod(name, claim, request, args...), "requests: {cpu: 200m", "requests: {cpu: 20m", 1)
	y = strings.Replace(y, `limits: {cpu: "1"`, "limits: {cpu: 250m", 1)
	if nodeName != "" {
		y = pinned(y, nodeName)
	}
	return y
}

// mnAlloc is what a watch saw of a claim while it was allocated: the nodes its nodeSelector
// names, the pools of its memifnet.io results, the most memifnet.io devices its status reported.
type mnAlloc struct {
	nodes, pools map[string]bool
	reported     int
}

// mnWatchAllocations records every allocation of a claim in namespace default from now on (a
// link's claim is deallocated once its pods are done); stop ends the watch. The watch resumes
// from the last event seen when its stream breaks (it did under load).
func (x *tier3) mnWatchAllocations(ctx context.Context, t *testing.T) (stop func() (map[string]*mnAlloc, error)) {
	api := x.cs.ResourceV1().ResourceClaims("default")
	list, err := api.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return api.Watch(ctx, o) },
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]*mnAlloc{}
	done := make(chan error, 1)
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				done <- apierrors.FromObject(ev.Object)
				return
			}
			c, ok := ev.Object.(*resourcev1.ResourceClaim)
			if !ok || c.Status.Allocation == nil {
				continue
			}
			a := seen[c.Name]
			if a == nil {
				a = &mnAlloc{nodes: map[string]bool{}, pools: map[string]bool{}}
				seen[c.Name] = a
			}
			if sel := c.Status.Allocation.NodeSelector; sel != nil {
				for _, term := range sel.NodeSelectorTerms {
					for _, f := range term.MatchFields {
						for _, v := range f.Values {
							a.nodes[f.Key+"="+v] = true
						}
					}
				}
			}
			for _, r := range c.Status.Allocation.Devices.Results {
				a.pools[r.Driver+"/"+r.Pool] = true
			}
			n := 0
			for _, d := range c.Status.Devices {
				if d.Driver == names.DRADriver && d.Data != nil {
					n++
				}
			}
			a.reported = max(a.reported, n)
		}
		done <- nil
	}()
	return func() (map[string]*mnAlloc, error) {
		w.Stop()
		return seen, <-done
	}
}

// mnDRALinks: ten links, each a shared claim (requests east and west) and two pods using it,
// created at once. The DRA slots of both nodes hold six links at a time: the others wait for
// deallocated slots. Every pod Succeeds with verified traffic; each claim was allocated on one
// node (its nodeSelector, its results' pool) where both its pods ran and its driver reported
// both ports; links on both memifnet nodes, none on node 3; nothing left once they are deleted.
func (x *tier3) mnDRALinks(ctx context.Context, t *testing.T, nodes []cluster.NodeSpec) {
	stop := x.mnWatchAllocations(ctx, t)
	var y strings.Builder
	for i := range mnLinks {
		link := fmt.Sprintf("mn-dra-l%d", i)
		fmt.Fprintf(&y, "%s---\n%s---\n%s---\n", draLinkClaim(link),
			mnDRAPod(link+"-rx", link, "east", "", "--mode=rx", "--verify", "--size=1500", "--duration=4s", "--rx-mode=interrupt", "--connect-timeout=3m"),
			mnDRAPod(link+"-tx", link, "west", "", "--mode=tx", "--verify", "--size=1500", "--duration=2s", "--connect-timeout=3m"))
	}
	x.kubectlIn(ctx, t, y.String(), "apply", "-f", "-")
	t0 := time.Now()
	where, perNode := x.mnPairsTogether(ctx, t, "mn-dra-l", 6*time.Minute)
	elapsed := time.Since(t0)
	seen, err := stop()
	if err != nil {
		t.Fatalf("watching the claims: %v", err)
	}
	for link, n := range where {
		a := seen[link]
		if a == nil || !maps1(a.nodes, "metadata.name="+n) || !maps1(a.pools, names.DRADriver+"/"+n) || a.reported != 2 {
			t.Errorf("claim %s: allocated %+v; want on node %s only, where its pods ran, in pool %s, both ports reported", link, a, n, n)
		}
	}
	mnSpread(t, nodes, perNode)
	x.logf("dra: %d links by shared claims, 20 pods Succeeded with verified traffic in %.1fs; links per node %v", mnLinks, elapsed.Seconds(), perNode)
	x.kubectl(ctx, t, "delete", "pods", "--all", "-n", "default", "--wait=true")
	x.kubectl(ctx, t, "delete", "resourceclaims", "--all", "-n", "default", "--wait=true")
	x.mnDRANoLeftovers(ctx, t, nodes)
}

// maps1 reports whether set holds only key.
func maps1(set map[string]bool, key string) bool { return len(set) == 1 && set[key] }

// mnDRANoLeftovers waits until no memifnet node keeps anything of a claim: no checkpoint entry,
// CDI spec or mount of the driver, no attachment (mnLeftovers).
func (x *tier3) mnDRANoLeftovers(ctx context.Context, t *testing.T, nodes []cluster.NodeSpec) {
	t.Helper()
	for _, n := range nodes {
		if !n.Memifnet {
			continue
		}
		var left []string
		err := node.Poll(ctx, 90*time.Second, "node "+n.Name+" keeps no claim", func() (bool, error) {
			var err error
			if left, err = x.mnLeftovers(n, false); err != nil {
				return false, err
			}
			more, err := x.mnDRALeftovers(t, n)
			left = append(left, more...)
			return len(left) == 0, err
		})
		if err != nil {
			sort.Strings(left)
			t.Errorf("%v:\n  %s", err, strings.Join(left, "\n  "))
		}
	}
}

// mnDRALeftovers is what node n, seen from inside it, keeps of prepared claims.
func (x *tier3) mnDRALeftovers(t *testing.T, n cluster.NodeSpec) ([]string, error) {
	root, mountinfo, err := x.c.NodeView(n.Index)
	if err != nil {
		return nil, err
	}
	var left []string
	for uid := range draCheckpointAt(t, filepath.Join(root, t3DRACheckpoint)) {
		left = append(left, "checkpoint claim "+uid)
	}
	// The DaemonSet's /var/run/cdi is /run/cdi (see mnLeftovers).
	specs, _ := filepath.Glob(filepath.Join(root, "/run/cdi", "memifnet.io-claim_*.json"))
	for _, s := range specs {
		left = append(left, "file "+strings.TrimPrefix(s, root))
	}
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ms, err := safefs.ParseMountinfo(f)
	if err != nil {
		return nil, err
	}
	for _, m := range visibleUnder(ms, t3StateDir) {
		if strings.HasPrefix(m.Point, t3DRADir+"/") {
			left = append(left, "mount "+m.Point+" "+m.Source)
		}
	}
	return slices.Clip(left), nil
}
