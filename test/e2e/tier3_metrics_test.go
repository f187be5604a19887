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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The service accounts of scrapeAgentHTTPS, in kcNamespace: one bound to the ClusterRole
// memifnet-metrics-reader (a Prometheus), one not (any tenant).
const (
	kcScraper = "memifnet-scraper"
	kcNosy    = "memifnet-nosy"
)

// scrapeAgentHTTPS scrapes the node agent's /metrics on the node address as Prometheus and as a
// tenant would (issue 32 item 6): HTTPS, 401 without a token, 403 for a service account without
// memifnet-metrics-reader, 200 with the per-port metrics for one bound to it; the kubelet's
// probes' endpoints answer without a token. The reviews are the cluster's real TokenReview and
// SubjectAccessReview.
func (x *tier3) scrapeAgentHTTPS(ctx context.Context, t *testing.T) {
	x.kubectlIn(ctx, t, fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata: {name: %[1]s, namespace: %[3]s}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: %[2]s, namespace: %[3]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: memifnet-metrics-reader}
subjects: [{kind: ServiceAccount, name: %[1]s, namespace: %[3]s}]
`, kcScraper, kcNosy, kcNamespace), "apply", "-f", "-")
	defer x.kubectl(ctx, t, "delete", "clusterrolebinding", kcScraper, "--ignore-not-found")
	token := func(sa string) string {
		return strings.TrimSpace(x.kubectl(ctx, t, "-n", kcNamespace, "create", "token", sa, "--duration=10m"))
	}
	pods, err := x.cs.CoreV1().Pods(t3Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=memifnet-node"})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.PodIP == "" {
		t.Fatalf("the node agent pod: %v %d", err, len(pods.Items))
	}
	base := "https://" + net.JoinHostPort(pods.Items[0].Status.PodIP, "9102")
	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // the agent's self-signed certificate
	get := func(path, token string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s%s: %v", base, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body := get(p, ""); code != 200 {
			t.Errorf("%s without a token: %d %q", p, code, body)
		}
	}
	checks := []struct {
		who, token string
		code       int
	}{{"no token", "", 401}, {"a forged token", "not-a-token", 401}, {kcNosy, token(kcNosy), 403}}
	for _, c := range checks {
		if code, body := get("/metrics", c.token); code != c.code || strings.Contains(body, "memifnet_") {
			t.Errorf("/metrics as %s: %d %q, want %d without metrics", c.who, code, body, c.code)
		}
	}
	code, body := get("/metrics", token(kcScraper))
	if code != 200 || !strings.Contains(body, `memifnet_port_up{link="kc-link",namespace="`+kcNamespace+`"`) {
		t.Errorf("/metrics as %s (memifnet-metrics-reader): %d, want 200 with kc-link's ports\n%.2000s", kcScraper, code, body)
	}
	x.logf("metrics: %s/metrics: 401 without or with a forged token, 403 for %s, 200 for %s; probes open", base, kcNosy, kcScraper)
}
