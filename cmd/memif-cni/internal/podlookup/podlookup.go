// Package podlookup finds the pod's memifnet.io/ports annotation: from the runtime's
// runtimeConfig, else from the kubelet's Pods API, else from the API server.
package podlookup

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Pod identifies the pod from CNI_ARGS.
type Pod struct {
	Namespace, Name, UID string
}

// Source says where the annotations came from (for errors and tests).
type Source string

// Sources, in the order they are tried.
const (
	SourceRuntime   Source = "runtimeConfig"
	SourceKubelet   Source = "kubelet"
	SourceAPIServer Source = "apiserver"
)

// Options are the places to ask.
type Options struct {
	// RuntimeAnnotations is runtimeConfig's io.kubernetes.cri.pod-annotations; nil if the runtime
	// did not pass the capability.
	RuntimeAnnotations map[string]string
	KubeletURL         string // "none" or "" to skip
	Kubeconfig         string // "" to skip
	Timeout            time.Duration
}

// ErrNotFound means no source could be asked or none knew the pod.
var ErrNotFound = errors.New("pod annotations not found")

// Annotations returns the pod's annotations and where they came from.
func Annotations(ctx context.Context, pod Pod, o Options) (map[string]string, Source, error) {
	if o.RuntimeAnnotations != nil {
		return o.RuntimeAnnotations, SourceRuntime, nil
	}
	var tried []string
	if o.KubeletURL != "" && o.KubeletURL != "none" {
		ann, err := fromKubelet(ctx, pod, o)
		if err == nil {
			return ann, SourceKubelet, nil
		}
		tried = append(tried, fmt.Sprintf("kubelet %s: %v", o.KubeletURL, err))
	}
	if o.Kubeconfig != "" {
		ann, err := fromAPIServer(ctx, pod, o)
		if err == nil {
			return ann, SourceAPIServer, nil
		}
		tried = append(tried, fmt.Sprintf("API server (kubeconfig %s): %v", o.Kubeconfig, err))
	} else {
		tried = append(tried, "API server: no kubeconfig in the network config")
	}
	return nil, "", fmt.Errorf("%w for pod %s/%s: runtimeConfig has no %q (declare the capability); %s",
		ErrNotFound, pod.Namespace, pod.Name, "io.kubernetes.cri.pod-annotations", strings.Join(tried, "; "))
}

// fromKubelet reads GET /pods. The kubelet's serving certificate is self-signed and the address
// is the node's own loopback, so the certificate is not verified. A closed port is found within
// a short dial timeout, so a node without the kubelet API costs little.
func fromKubelet(ctx context.Context, pod Pod, o Options) (map[string]string, error) {
	u, err := url.Parse(strings.TrimSuffix(o.KubeletURL, "/") + "/pods")
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see above
		DialContext:     (&net.Dialer{Timeout: 500 * time.Millisecond}).DialContext,
	}
	defer tr.CloseIdleConnections()
	var list corev1.PodList
	if err := getJSON(ctx, &http.Client{Transport: tr, Timeout: o.Timeout}, u.String(), &list); err != nil {
		return nil, err
	}
	for i := range list.Items {
		p := &list.Items[i]
		if matches(p, pod) {
			return nonNil(p.Annotations), nil
		}
	}
	return nil, fmt.Errorf("pod %s/%s (uid %s) is not in the kubelet's pod list", pod.Namespace, pod.Name, pod.UID)
}

func fromAPIServer(ctx context.Context, pod Pod, o Options) (map[string]string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.Timeout = o.Timeout
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	u := strings.TrimSuffix(cfg.Host, "/") + cfg.APIPath + "/api/v1/namespaces/" + url.PathEscape(pod.Namespace) + "/pods/" + url.PathEscape(pod.Name)
	var p corev1.Pod
	if err := getJSON(ctx, hc, u, &p); err != nil {
		return nil, err
	}
	if pod.UID != "" && string(p.UID) != pod.UID {
		// The pod was deleted and re-created under the same name; this sandbox is the old one.
		return nil, fmt.Errorf("pod %s/%s has uid %s, the sandbox belongs to uid %s", pod.Namespace, pod.Name, p.UID, pod.UID)
	}
	return nonNil(p.Annotations), nil
}

func matches(p *corev1.Pod, pod Pod) bool {
	if pod.UID != "" {
		return string(p.UID) == pod.UID
	}
	return p.Namespace == pod.Namespace && p.Name == pod.Name
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func getJSON(ctx context.Context, hc *http.Client, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", u, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("GET %s: decode: %w", u, err)
	}
	return nil
}
