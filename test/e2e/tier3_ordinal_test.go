//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/test/e2e/node"
)

// statefulSetExample is two StatefulSets of 3 annotation-only memif-perf pods whose one port is
// on link nf-{ordinal}: replica i of nf-a and replica i of nf-b share link nf-i. They run until
// deleted (a StatefulSet restarts what exits), printing verified counters every second.
const statefulSetExample = "manifests/examples/statefulset-link.yaml"

// ordinal: the example's two StatefulSets of 3 with link "nf-{ordinal}" pair replica i with
// replica i, each pair with verified traffic; scaled to 4, the new pair links too and the old ones
// keep going. A bare pod using {ordinal} without the StatefulSet's index label is refused at apply.
func (x *tier3) ordinal(ctx context.Context, t *testing.T) {
	x.webhookReady(ctx, t)
	msg := x.refused(ctx, t, "ord-bare", annotationOnlyPod("ord-bare", "p", `p@ord-{ordinal}`),
		`metadata.annotations[memifnet.io/ports]: port 0 (p): field "link": link "ord-{ordinal}" uses {ordinal} but the pod has no label `+names.PodIndexLabel)
	x.logf("ordinal: refused: %s", msg)
	x.kubectl(ctx, t, "apply", "-f", statefulSetExample)
	start := time.Now()
	for i := range 3 {
		x.ordinalPair(ctx, t, i)
	}
	x.logf("ordinal: 3 pairs linked with verified traffic in %.1fs", time.Since(start).Seconds())
	start = time.Now()
	x.kubectl(ctx, t, "scale", "statefulset", "nf-a", "nf-b", "--replicas=4")
	for i := range 4 {
		x.ordinalPair(ctx, t, i)
	}
	x.logf("ordinal: scaled to 4: pair 3 linked and all 4 verified in %.1fs", time.Since(start).Seconds())
	x.kubectl(ctx, t, "delete", "-f", statefulSetExample, "--cascade=foreground", "--wait=true", "--timeout=2m")
	x.noLeftovers(ctx, t, "after the StatefulSets")
}

// ordinalPair checks replica i of both sets: the annotation pinned to link nf-i with its link
// label, and nf-a-i receiving verified traffic from nf-b-i (verify_errors=0 and its count
// rising), nf-b-i sending.
func (x *tier3) ordinalPair(ctx context.Context, t *testing.T, i int) {
	t.Helper()
	link := "nf-" + strconv.Itoa(i)
	for _, set := range []string{"nf-a", "nf-b"} {
		name := fmt.Sprintf("%s-%d", set, i)
		x.running(ctx, t, name)
		p := x.pod(ctx, t, name)
		if a := p.Annotations[names.PortsAnnotation]; !strings.Contains(a, `"link":"`+link+`"`) || p.Labels[names.LinkLabelPrefix+link] != "p" {
			t.Fatalf("%s: annotation %q labels %v: want link %s pinned and labelled", name, a, p.Labels, link)
		}
	}
	rx, tx := fmt.Sprintf("nf-a-%d", i), fmt.Sprintf("nf-b-%d", i)
	first := x.perfCounter(ctx, t, rx, "rx_pkts", 1)
	then := x.perfCounter(ctx, t, rx, "rx_pkts", first+1)
	sent := x.perfCounter(ctx, t, tx, "tx_pkts", 1)
	x.logf("ordinal: link %s: %s verified rx_pkts=%d (rising from %d, verify_errors=0), %s tx_pkts=%d", link, rx, then, first, tx, sent)
}

var progressLine = regexp.MustCompile(`rx_pkts=(\d+) tx_pkts=(\d+) drops=\d+ verify_errors=(\d+)`)

// perfCounter waits until a running memif-perf pod's latest per-second line shows counter at
// least min, and fails at once on a verification error. It returns the counter.
func (x *tier3) perfCounter(ctx context.Context, t *testing.T, name, counter string, min uint64) uint64 {
	t.Helper()
	var got uint64
	var last string
	if err := node.Poll(ctx, 2*time.Minute, fmt.Sprintf("%s %s >= %d", name, counter, min), func() (bool, error) {
		out, err := x.c.KubectlCmd(ctx, "logs", name, "--tail=3").CombinedOutput()
		if err != nil {
			return false, nil
		}
		m := progressLine.FindAllStringSubmatch(string(out), -1)
		if len(m) == 0 {
			return false, nil
		}
		last = m[len(m)-1][0]
		if m[len(m)-1][3] != "0" {
			return false, fmt.Errorf("%s: %s", name, last)
		}
		col := 1
		if counter == "tx_pkts" {
			col = 2
		}
		got, _ = strconv.ParseUint(m[len(m)-1][col], 10, 64)
		return got >= min, nil
	}); err != nil {
		t.Fatalf("%v (last line %q); logs:\n%s", err, last, x.logs(ctx, "default", name))
	}
	return got
}
