//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/memifnet/memifnet/test/e2e/cluster"
	"github.com/memifnet/memifnet/test/e2e/node"
)

// mnOpsLink is one link of `kubectl memifnet links -o json` and `node -o json`, with the rates.
type mnOpsLink struct {
	Namespace, Link, Node, Status, State, StateUnknownReason string
	Ends                                                     []struct {
		Pod, Port string
		Stats     *struct {
			Up                   bool
			RxPackets, TxPackets float64
			RxPPS                *float64 `json:"rxPacketsPerSecond"`
		}
	}
}

// received is what the link's ends received, in packets and per second.
func (l *mnOpsLink) received() (pkts, pps float64) {
	for _, e := range l.Ends {
		if e.Stats != nil {
			pkts += e.Stats.RxPackets
			if e.Stats.RxPPS != nil {
				pps += *e.Stats.RxPPS
			}
		}
	}
	return pkts, pps
}

// running says what is wrong with l as the running link of node n, or "": on n, up, its ends'
// packets received beyond after (what an earlier reading said: the agent's counters are live)
// at a nonzero rate.
func (l *mnOpsLink) running(n cluster.NodeSpec, after float64) string {
	switch pkts, pps := l.received(); {
	case l.Node != n.Name || l.State != "up" || len(l.Ends) != 2:
		return fmt.Sprintf("node %q state %q (%s), %d ends; want node %s, up, two ends", l.Node, l.State, l.StateUnknownReason, len(l.Ends), n.Name)
	case pkts <= after || pps == 0:
		return fmt.Sprintf("received %.0f packets at %.0f/s; want more than %.0f, at a nonzero rate", pkts, pps, after)
	}
	return ""
}

// mnOpsKubectl: `kubectl memifnet links -A` and `kubectl memifnet node NODE` of every node show
// each memifnet node's running link on that node, up, with packets rising from one reading to
// the next, read from its agent; the node without memifnet says it runs no agent, with no error and no note.
func (x *tier3) mnOpsKubectl(ctx context.Context, t *testing.T, nodes []cluster.NodeSpec) {
	kc := x.c.Kubeconfig()
	seen := map[string]float64{} // link -> packets received at the last reading
	// Twice: the second reading must show more packets than the first (live counters).
	for round := range 2 {
		var why string
		if err := node.Poll(ctx, time.Minute, "every node's link up in kubectl memifnet links -A", func() (bool, error) {
			var links struct{ Links []mnOpsLink }
			x.memifnetJSON(ctx, t, kc, &links, "links", "-A")
			why = ""
			for _, n := range nodes {
				if !n.Memifnet {
					continue
				}
				l := mnFindLink(links.Links, opLink(n))
				if l == nil {
					why += opLink(n) + ": missing; "
				} else if w := l.running(n, seen[opLink(n)]); w != "" {
					why += opLink(n) + ": " + w + "; "
				}
			}
			for _, n := range nodes {
				if l := mnFindLink(links.Links, opLink(n)); why == "" && l != nil {
					seen[opLink(n)], _ = l.received()
				}
			}
			return why == "", nil
		}); err != nil {
			t.Fatalf("reading %d: %v: %s", round+1, err, why)
		}
	}
	table, notes, err := x.memifnetPlugin(ctx, t, kc, "links", "-A")
	x.logf("ops: kubectl memifnet links -A (%v, notes %q):\n%s", err, notes, table)
	for _, n := range nodes {
		x.mnOpsNode(ctx, t, n, seen[opLink(n)])
	}
}

// mnOpsNode checks `kubectl memifnet node` of node n: a memifnet node names its (upgraded,
// ready) agent and lists its own link, up, with more packets than after, and no other node's; the node without
// memifnet says it runs no agent and has no link.
func (x *tier3) mnOpsNode(ctx context.Context, t *testing.T, n cluster.NodeSpec, after float64) {
	t.Helper()
	kc := x.c.Kubeconfig()
	var rep struct {
		Node  string
		Agent *struct {
			Pod, Image string
			Ready      bool
		}
		AgentNote string
		Links     []mnOpsLink
	}
	var why string
	if err := node.Poll(ctx, time.Minute, "kubectl memifnet node "+n.Name, func() (bool, error) {
		x.memifnetJSON(ctx, t, kc, &rep, "node", n.Name)
		switch {
		case !n.Memifnet:
			why = fmt.Sprintf("agent %+v, note %q, links %+v; want no agent, a note, no links", rep.Agent, rep.AgentNote, rep.Links)
			return rep.Agent == nil && strings.Contains(rep.AgentNote, "no memifnet node agent runs on this node") && len(rep.Links) == 0, nil
		case rep.Agent == nil || !rep.Agent.Ready || rep.Agent.Image != t3UpgradeImage:
			why = fmt.Sprintf("agent %+v (%s); want a ready agent running %s", rep.Agent, rep.AgentNote, t3UpgradeImage)
			return false, nil
		case len(rep.Links) != 1 || rep.Links[0].Link != opLink(n):
			why = fmt.Sprintf("links %+v; want %s only (the node's running link)", rep.Links, opLink(n))
			return false, nil
		}
		why = rep.Links[0].running(n, after)
		return why == "", nil
	}); err != nil {
		t.Fatalf("%v: %s", err, why)
	}
	table, notes, err := x.memifnetPlugin(ctx, t, kc, "node", n.Name)
	if err != nil || notes != "" || (!n.Memifnet && !strings.Contains(table, "Agent: none: no memifnet node agent runs on this node")) {
		t.Errorf("kubectl memifnet node %s: %v, stderr %q:\n%s", n.Name, err, notes, table)
	}
	x.logf("ops: kubectl memifnet node %s:\n%s", n.Name, table)
}

func mnFindLink(links []mnOpsLink, name string) *mnOpsLink {
	for i := range links {
		if links[i].Namespace == "default" && links[i].Link == name {
			return &links[i]
		}
	}
	return nil
}

// mnOpsScraper is the service account mnOpsMetrics scrapes as, bound to memifnet-metrics-reader.
const mnOpsScraper = "mn-scraper"

// mnOpsMetrics scrapes every memifnet node's agent at its node address (HTTPS :9102, a bound
// token that the agent has the API server review): 401 without a token, and with it the node's
// own link's memifnet_port_up (both ends) and memifnet_link_up at 1, and no series of another
// node's link.
func (x *tier3) mnOpsMetrics(ctx context.Context, t *testing.T, mem []cluster.NodeSpec) {
	x.kubectlIn(ctx, t, fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata: {name: %[1]s, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: memifnet-metrics-reader}
subjects: [{kind: ServiceAccount, name: %[1]s, namespace: default}]
`, mnOpsScraper), "apply", "-f", "-")
	defer x.kubectl(ctx, t, "delete", "clusterrolebinding/"+mnOpsScraper, "-n", "default", "serviceaccount/"+mnOpsScraper, "--ignore-not-found")
	token := strings.TrimSpace(x.kubectl(ctx, t, "create", "token", mnOpsScraper, "--duration=10m"))
	for _, n := range mem {
		addr := n.Name // the agent runs in the node's network namespace, at the node's address
		base := "https://" + net.JoinHostPort(addr, "9102") + "/metrics"
		if code, _ := mnGet(ctx, t, base, ""); code != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d, want 401", base, code)
		}
		code, body := mnGet(ctx, t, base, token)
		if code != http.StatusOK {
			t.Fatalf("%s as %s: %d\n%.1000s", base, mnOpsScraper, code, body)
		}
		own := opLink(n)
		want := map[string]bool{
			`memifnet_port_up{link="` + own + `",namespace="default",pod="` + own + `-rx",port="east"} 1`: false,
			`memifnet_port_up{link="` + own + `",namespace="default",pod="` + own + `-tx",port="west"} 1`: false,
			`memifnet_link_up{claim="",link="` + own + `",namespace="default"} 1`:                         false,
		}
		var foreign []string
		for _, l := range strings.Split(body, "\n") {
			if _, ok := want[l]; ok {
				want[l] = true
			}
			for _, o := range mem {
				if o.Name != n.Name && strings.Contains(l, `link="`+opLink(o)+`"`) {
					foreign = append(foreign, l)
				}
			}
		}
		for l, seen := range want {
			if !seen {
				t.Errorf("%s: no %s", base, l)
			}
		}
		if len(foreign) > 0 {
			t.Errorf("%s reports another node's link:\n  %s", base, strings.Join(foreign, "\n  "))
		}
		x.logf("ops: %s (token of %s, reviewed by the API server): %s's link up on both ends, no other node's link", base, mnOpsScraper, n.Name)
	}
}

// mnGet GETs url with a bearer token (none for ""), trusting the agent's self-signed certificate.
func mnGet(ctx context.Context, t *testing.T, url, token string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
