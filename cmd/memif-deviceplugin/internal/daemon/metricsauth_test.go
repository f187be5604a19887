package daemon

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"k8s.io/client-go/kubernetes"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/observe/metricsauth/authtest"
)

// TestMetricsOverHTTPS scrapes the running agent as Prometheus and a pod would: on the node
// address, over TLS, /metrics answers only a token the API server authenticates of a user it
// authorizes for get /metrics; the probes answer anyone. The TokenReview and
// SubjectAccessReview answers come from a stand-in for the API server (authtest) that client-go
// talks to over HTTP with the review JSON; a real API server is e2e tier 3's.
func TestMetricsOverHTTPS(t *testing.T) {
	e := newEnv(t, 1)
	api := authtest.New(t, "/metrics")
	api.User("prometheus-token", "system:serviceaccount:monitoring:prometheus", true)
	api.User("tenant-token", "system:serviceaccount:tenant:app", false)
	o := e.options(t, 2)
	o.HTTPAddr, o.LocalMetricsAddr, o.MetricsAuth = "127.0.0.1:0", "127.0.0.1:0", true
	o.KubeClient = func() (kubernetes.Interface, error) { return api.Client(), nil }
	d, _ := start(t, o)
	var secure, local string
	eventually(t, 5*time.Second, "endpoints listening", func() bool { secure, local = d.HTTPAddrs(); return secure != "" && local != "" })

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(url, token string) (int, string) {
		t.Helper()
		req, err := http.NewRequest("GET", url, nil)
		must(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		must(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("http://"+secure+"/metrics", "prometheus-token"); code != http.StatusBadRequest {
		t.Errorf("plain HTTP on the node address: %d %q, want 400 (TLS only)", code, body)
	}
	for _, tc := range []struct {
		name, token string
		code        int
		body        string
	}{
		{"no token", "", 401, "no bearer token"},
		{"a token the API server rejects", "forged", 401, "does not accept the token"},
		{"a user not authorized", "tenant-token", 403, "may not get /metrics"},
	} {
		if code, body := get("https://"+secure+"/metrics", tc.token); code != tc.code || !strings.Contains(body, tc.body) || strings.Contains(body, "memifnet_") {
			t.Errorf("%s: %d %q, want %d with %q and no metrics", tc.name, code, body, tc.code, tc.body)
		}
	}
	code, body := get("https://"+secure+"/metrics", "prometheus-token")
	if code != 200 || !strings.Contains(body, "memifnet_deviceplugin_devices{") {
		t.Fatalf("authorized scrape: %d\n%s", code, body)
	}
	if _, err := new(expfmt.TextParser).TextToMetricFamilies(strings.NewReader(body)); err != nil {
		t.Fatalf("authorized scrape does not parse: %v", err)
	}
	if code, _ := get("https://"+secure+"/healthz", ""); code != 200 {
		t.Errorf("healthz over HTTPS without a token: %d", code)
	}
	e.kubelet.WaitRegistration(t, 2*time.Second)
	eventually(t, 2*time.Second, "readyz over HTTPS without a token", func() bool { code, _ := get("https://"+secure+"/readyz", ""); return code == 200 })

	// The local endpoint: plain HTTP, no token, on the loopback address only.
	if code, body := get("http://"+local+"/metrics", ""); code != 200 || !strings.Contains(body, "memifnet_deviceplugin_devices{") {
		t.Errorf("local /metrics: %d", code)
	}
	_, port, _ := net.SplitHostPort(local)
	for _, ip := range nonLoopback(t) {
		if c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, port), 2*time.Second); err == nil {
			c.Close()
			t.Errorf("the local endpoint answers on %s", ip)
		}
	}
}

// nonLoopback is the machine's addresses other than loopback ones.
func nonLoopback(t *testing.T) []string {
	addrs, err := net.InterfaceAddrs()
	must(t, err)
	var out []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			out = append(out, n.IP.String())
		}
	}
	if len(out) == 0 {
		t.Fatal("no non-loopback IPv4 address to check the local endpoint against")
	}
	return out
}

// TestLocalMetricsAddressLoopbackOnly: the unauthenticated endpoint may only be given a
// loopback IP address.
func TestLocalMetricsAddressLoopbackOnly(t *testing.T) {
	for _, addr := range []string{":9101", "0.0.0.0:9101", "[::]:9101", "localhost:9101", "10.0.0.1:9101", "9101"} {
		o := Options{LocalMetricsAddr: addr}
		if err := o.checkHTTP(); err == nil || !strings.Contains(err.Error(), "--local-metrics-address") {
			t.Errorf("%q: %v, want refused", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:9101", "[::1]:9101", "127.0.0.2:0", ""} {
		o := Options{LocalMetricsAddr: addr}
		if err := o.checkHTTP(); err != nil {
			t.Errorf("%q: %v", addr, err)
		}
	}
}
