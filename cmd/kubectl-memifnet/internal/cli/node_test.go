package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/memifnet/memifnet/cmd/kubectl-memifnet/internal/agentmetrics"
	"github.com/memifnet/memifnet/cmd/kubectl-memifnet/internal/nodeview"
)

// counting is an agent whose ports' counters rise 1000 packets a scrape; it runs on n1 only.
type counting struct{ scrapes int }

func (c *counting) Scrape(_ context.Context, node string) (agentmetrics.Snapshot, error) {
	if node != "n1" {
		return agentmetrics.Snapshot{}, fmt.Errorf("no running node agent on node %s", node)
	}
	c.scrapes++
	n := float64(c.scrapes * 1000)
	return agentmetrics.Snapshot{At: time.Unix(int64(c.scrapes), 0), Ports: map[agentmetrics.Key]agentmetrics.Counters{
		{Namespace: "ns", Pod: "rx", Port: "east"}: {HasUp: true, Up: true, RxPackets: n},
		{Namespace: "ns", Pod: "tx", Port: "west"}: {HasUp: true, Up: true, TxPackets: n},
	}}, nil
}

func nodeCluster() *fake.Clientset {
	node := func(name string, labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	pod := func(ns, name, node string, labels, ann map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: ann},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "deviceplugin", Image: "memifnet:v2"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue}}}}
	}
	agent := map[string]string{"app.kubernetes.io/name": "memifnet-node"}
	return fake.NewClientset(
		node("n1", map[string]string{nodeview.DefaultNodeLabel: "true"}), node("n2", map[string]string{nodeview.DefaultNodeLabel: "true"}), node("n3", nil),
		pod(AgentNamespace, "memifnet-node-abc", "n1", agent, nil),
		pod("ns", "rx", "n1", nil, map[string]string{"memifnet.io/ports": "east@l"}),
		pod("ns", "tx", "n1", nil, map[string]string{"memifnet.io/ports": "west@l"}),
		pod("ns", "other-rx", "n2", nil, map[string]string{"memifnet.io/ports": "east@o"}),
	)
}

// runNodeOut runs `node NAME -o output`.
func runNodeOut(t *testing.T, name, output string) (string, string) {
	t.Helper()
	var out, errw bytes.Buffer
	o := opts{agentNS: AgentNamespace, rateInterval: time.Millisecond}
	p, err := outputPrinter(output, "", &o)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{opts: o, cs: nodeCluster(), printer: p, out: &out, errw: &errw, metrics: &counting{}}
	if err := runNode(context.Background(), e, []string{name}); err != nil {
		t.Fatalf("node %s: %v", name, err)
	}
	return out.String(), errw.String()
}

// `kubectl memifnet node` names the node's agent and lists the links on the node with their
// state and rates from that agent; a node without an agent says so, plainly, and is no error.
func TestNodeAgentAndLinks(t *testing.T) {
	out, notes := runNodeOut(t, "n1", "")
	for _, want := range []string{
		"Agent memifnet-system/memifnet-node-abc (Running, ready, memifnet:v2)",
		"ns          l      device-plugin   rx/east   tx/west   Wired    up      0        1.0k     0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("node n1: no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "other-rx") || notes != "" {
		t.Errorf("node n1 shows another node's link, or notes %q:\n%s", notes, out)
	}
	out, notes = runNodeOut(t, "n3", "")
	if !strings.Contains(out, "Agent: none: no memifnet node agent runs on this node: the agent's DaemonSets in memifnet-system do not select it") ||
		!strings.Contains(out, "Links: none") || notes != "" || strings.Contains(out, "error") {
		t.Errorf("node n3 (no agent), notes %q:\n%s", notes, out)
	}
	out, _ = runNodeOut(t, "n2", "")
	if !strings.Contains(out, "although it is labelled memifnet.io/node=true") {
		t.Errorf("node n2 (labelled, no agent):\n%s", out)
	}
	js, _ := runNodeOut(t, "n1", "json")
	var rep nodeview.Report
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Agent == nil || rep.Agent.Pod != "memifnet-node-abc" || !rep.Agent.Ready || len(rep.Links) != 1 || rep.Links[0].State != "up" ||
		rep.Links[0].Ends[0].Stats == nil || *rep.Links[0].Ends[0].Stats.RxPPS != 1000 {
		t.Errorf("node n1 -o json: %s", js)
	}
}

// files is an agent whose port's status file is rewritten every third scrape, 5 s of
// packets (5000) later.
type files struct{ scrapes int }

func (f *files) Scrape(context.Context, string) (agentmetrics.Snapshot, error) {
	f.scrapes++
	file := int64(f.scrapes / 3)
	return agentmetrics.Snapshot{At: time.Now(), Ports: map[agentmetrics.Key]agentmetrics.Counters{
		{Namespace: "ns", Pod: "rx", Port: "east"}: {HasUp: true, Up: true, RxPackets: float64(5000 * file), At: time.Unix(5*file, 0)}}}, nil
}

// The second scrape for rates waits for the port's next status file: one read twice has no
// rate, and the rate is over the files' times (1000/s), not over the scrapes'.
func TestScrapeWaitsForNextStatusFile(t *testing.T) {
	src := &files{}
	e := &env{opts: opts{rateInterval: time.Millisecond}, metrics: src}
	first, second, errs := e.scrape(context.Background(), []string{"n1"}, true)
	k := agentmetrics.Key{Namespace: "ns", Pod: "rx", Port: "east"}
	if len(errs) != 0 || second["n1"] == nil {
		t.Fatalf("errs %v, second %v", errs, second)
	}
	r, ok := agentmetrics.Rate(*first["n1"], *second["n1"], k)
	if !ok || r.RxPPS != 1000 || src.scrapes != 3 {
		t.Errorf("rate %+v %v after %d scrapes; want 1000/s after 3", r, ok, src.scrapes)
	}
}
