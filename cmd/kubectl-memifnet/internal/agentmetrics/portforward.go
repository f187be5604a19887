package agentmetrics

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	n "github.com/memifnet/memifnet/pkg/memif/portmetricnames"
)

// DefaultLocalPort is the port of the agent's --local-metrics-address, used when its pod's
// arguments do not name one.
const DefaultLocalPort = 9101

// PortForward reads the agent's /metrics on its local endpoint (--local-metrics-address, plain
// HTTP on the node's loopback) through a port-forward to the agent pod, as kubectl port-forward
// does: the kubelet's runtime dials the port inside the pod's network namespace, which for the
// hostNetwork agent is the node's, so the loopback endpoint is reached and nothing needs a
// token. The agent's node-address /metrics needs a bearer token the API server's pod proxy would
// not pass on. RBAC the user needs, in the agent's namespace only: list pods (to find the
// node's agent) and create pods/portforward.
type PortForward struct {
	Client    kubernetes.Interface
	Config    *rest.Config // the user's, for the port-forward's connection
	Namespace string       // the agent's namespace, memifnet-system
	Selector  string       // the agent pods' label selector
}

// Scrape implements Source.
func (p PortForward) Scrape(ctx context.Context, node string) (Snapshot, error) {
	agent, err := findAgent(ctx, p.Client, p.Namespace, p.Selector, node)
	if err != nil {
		return Snapshot{}, err
	}
	port, err := localPort(agent)
	if err != nil {
		return Snapshot{}, err
	}
	body, err := p.get(ctx, agent, port)
	if err != nil {
		return Snapshot{}, err
	}
	at := time.Now()
	samples, err := Parse(bytes.NewReader(body), IsPortMetric)
	if err != nil {
		return Snapshot{}, fmt.Errorf("%s/%s's metrics: %w", p.Namespace, agent.Name, err)
	}
	if len(samples) == 0 {
		return Snapshot{}, fmt.Errorf("node agent %s/%s exports no per-port metrics (%s...)", p.Namespace, agent.Name, n.Up)
	}
	return FromSamples(at, samples), nil
}

// findAgent is the running agent pod on node.
func findAgent(ctx context.Context, c kubernetes.Interface, ns, selector, node string) (*corev1.Pod, error) {
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, fmt.Errorf("finding the node agent in %s: %w", ns, err)
	}
	for i := range pods.Items {
		if pods.Items[i].Status.Phase == corev1.PodRunning {
			return &pods.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no running node agent (%s) on node %s in %s", selector, node, ns)
}

// localPort is the port of the agent's --local-metrics-address, from its arguments.
func localPort(pod *corev1.Pod) (int, error) {
	for _, c := range pod.Spec.Containers {
		for _, a := range c.Args {
			v, ok := strings.CutPrefix(a, "--local-metrics-address=")
			if !ok {
				continue
			}
			i := strings.LastIndexByte(v, ':')
			port, err := strconv.Atoi(v[i+1:])
			if v == "" || i < 0 || err != nil || port <= 0 || port > 65535 {
				return 0, fmt.Errorf("node agent %s/%s serves no local metrics (--local-metrics-address=%q)", pod.Namespace, pod.Name, v)
			}
			return port, nil
		}
	}
	return DefaultLocalPort, nil
}

// get forwards a local port to the agent's port and reads /metrics through it.
func (p PortForward) get(ctx context.Context, agent *corev1.Pod, port int) ([]byte, error) {
	dialer, err := p.dialer(agent)
	if err != nil {
		return nil, err
	}
	stop, ready := make(chan struct{}), make(chan struct{})
	defer close(stop)
	var errOut bytes.Buffer
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(port)}, stop, ready, io.Discard, &errOut)
	if err != nil {
		return nil, fmt.Errorf("port-forward to %s/%s: %w", p.Namespace, agent.Name, err)
	}
	failed := make(chan error, 1)
	go func() { failed <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-failed:
		return nil, p.forwardError(agent, err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) != 1 {
		return nil, fmt.Errorf("port-forward to %s/%s: no local port: %v", p.Namespace, agent.Name, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[0].Local), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading %s/%s's metrics through a port-forward to its port %d: %w%s", p.Namespace, agent.Name, port, err, said(&errOut))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("HTTP %s: %s", resp.Status, strings.TrimSpace(string(body[:min(len(body), 200)])))
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s/%s's metrics through a port-forward to its port %d: %w", p.Namespace, agent.Name, port, err)
	}
	return body, nil
}

// dialer connects to the pod's portforward subresource over websocket, falling back to SPDY
// (an API server or proxy without the websocket protocol), as kubectl port-forward does.
func (p PortForward) dialer(agent *corev1.Pod) (httpstream.Dialer, error) {
	u := p.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(agent.Namespace).Name(agent.Name).SubResource("portforward").URL()
	ws, err := portforward.NewSPDYOverWebsocketDialer(u, p.Config)
	if err != nil {
		return nil, fmt.Errorf("port-forward: %w", err)
	}
	rt, upgrader, err := spdy.RoundTripperFor(p.Config)
	if err != nil {
		return nil, fmt.Errorf("port-forward: %w", err)
	}
	sp := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, (*url.URL)(u))
	return portforward.NewFallbackDialer(ws, sp, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	}), nil
}

// forwardError says why the port-forward did not start; a refusal says which right is missing.
func (p PortForward) forwardError(agent *corev1.Pod, err error) error {
	if err == nil {
		err = errors.New("ended before it was ready")
	}
	if apierrors.IsForbidden(err) || strings.Contains(err.Error(), "forbidden") {
		return fmt.Errorf("port-forward to %s/%s is forbidden (reading the node agent's metrics needs create pods/portforward in %s): %w", p.Namespace, agent.Name, p.Namespace, err)
	}
	return fmt.Errorf("port-forward to %s/%s: %w", p.Namespace, agent.Name, err)
}

// said is what the port-forward reported on its error stream, if anything.
func said(b *bytes.Buffer) string {
	if s := strings.TrimSpace(b.String()); s != "" {
		return " (port-forward: " + s + ")"
	}
	return ""
}
