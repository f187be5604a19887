// Package podapi reads a pod's annotations from the kubelet's Pods API or from the API server.
// It is the work of the memif-cni-podinfo helper (see package podquery).
package podapi

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/memifnet/memifnet/cmd/internal/podquery"
	"github.com/memifnet/memifnet/internal/names"
)

// Sources of the annotations (memif-cni reads them back from the answer).
const (
	SourceKubelet   = podquery.SourceKubelet
	SourceAPIServer = podquery.SourceAPIServer
)

// UserAgent is what the lookups call themselves: the helper's name.
const UserAgent = names.PodInfoHelper

// Lookup asks the kubelet, then the API server, whichever q names.
func Lookup(ctx context.Context, q podquery.Query) podquery.Answer {
	var a podquery.Answer
	timeout := time.Duration(q.TimeoutSeconds) * time.Second
	if q.KubeletURL != "" {
		ann, err := fromKubelet(ctx, q, timeout)
		if err == nil {
			return podquery.Answer{Found: true, Source: SourceKubelet, Annotations: ann}
		}
		a.Tried = append(a.Tried, fmt.Sprintf("kubelet %s: %v", q.KubeletURL, err))
	}
	if q.Kubeconfig != "" {
		ann, err := fromAPIServer(ctx, q, timeout)
		if err == nil {
			return podquery.Answer{Found: true, Source: SourceAPIServer, Annotations: ann}
		}
		a.Tried = append(a.Tried, fmt.Sprintf("API server (kubeconfig %s): %v", q.Kubeconfig, err))
	}
	return a
}

// podObject is the part of a core/v1 Pod we read. Decoding into it rather than the typed
// k8s.io/api Pod keeps that package, and its init, out of the binary.
type podObject struct {
	Metadata podMetadata `json:"metadata"`
}

type podMetadata struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	UID         string            `json:"uid"`
	Annotations map[string]string `json:"annotations"`
}

// podList is the part of a core/v1 PodList we read.
type podList struct {
	Items []podObject `json:"items"`
}

// fromKubelet reads GET /pods. The kubelet's serving certificate is self-signed and the address
// is the node's own loopback, so the certificate is not verified. A closed port is found within
// a short dial timeout, so a node without the kubelet API costs little.
func fromKubelet(ctx context.Context, q podquery.Query, timeout time.Duration) (map[string]string, error) {
	u, err := url.Parse(strings.TrimSuffix(q.KubeletURL, "/") + "/pods")
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see above
		DialContext:     (&net.Dialer{Timeout: 500 * time.Millisecond}).DialContext,
	}
	defer tr.CloseIdleConnections()
	var list podList
	if err := getJSON(ctx, &http.Client{Transport: tr, Timeout: timeout}, u.String(), &list); err != nil {
		return nil, err
	}
	for i := range list.Items {
		p := &list.Items[i].Metadata
		if matches(p, q) {
			return nonNil(p.Annotations), nil
		}
	}
	return nil, fmt.Errorf("pod %s/%s (uid %s) is not in the kubelet's pod list", q.Namespace, q.Name, q.UID)
}

func fromAPIServer(ctx context.Context, q podquery.Query, timeout time.Duration) (map[string]string, error) {
	kc, err := LoadKubeconfig(q.Kubeconfig, timeout)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	u := kc.Server + "/api/v1/namespaces/" + url.PathEscape(q.Namespace) + "/pods/" + url.PathEscape(q.Name)
	var obj podObject
	if err := getJSON(ctx, kc.Client, u, &obj); err != nil {
		return nil, err
	}
	p := obj.Metadata
	if q.UID != "" && p.UID != q.UID {
		// The pod was deleted and re-created under the same name; this sandbox is the old one.
		return nil, fmt.Errorf("pod %s/%s has uid %s, the sandbox belongs to uid %s", q.Namespace, q.Name, p.UID, q.UID)
	}
	return nonNil(p.Annotations), nil
}

func matches(p *podMetadata, q podquery.Query) bool {
	if q.UID != "" {
		return p.UID == q.UID
	}
	return p.Namespace == q.Namespace && p.Name == q.Name
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
	// Named in the API server's audit log and the kubelet's logs, like any Kubernetes client.
	req.Header.Set("User-Agent", UserAgent)
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
