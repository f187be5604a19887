package kubeletfake

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"
)

func corePod(p Pod) corev1.Pod {
	return corev1.Pod{
		TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: ktypes.UID(p.UID), Annotations: p.Annotations},
	}
}

// ServePodsAPI serves the kubelet's GET /pods over HTTPS with a self-signed certificate, as the
// kubelet does, until the test ends, and returns its base URL.
func (k *Kubelet) ServePodsAPI(t testing.TB) string {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/pods" {
			http.NotFound(w, r)
			return
		}
		k.mu.Lock()
		list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
		for _, p := range k.pods {
			list.Items = append(list.Items, corePod(p))
		}
		k.mu.Unlock()
		_ = json.NewEncoder(w).Encode(list)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// ServeAPIServer serves the API server's GET /api/v1/namespaces/<ns>/pods/<name> over HTTPS to
// bearer token "test-token" until the test ends, writes a kubeconfig for it into dir and returns
// the kubeconfig's path.
func (k *Kubelet) ServeAPIServer(t testing.TB, dir string) string {
	t.Helper()
	// HTTPS with the server's CA in the kubeconfig, as a real cluster has: client-go does not send
	// a bearer token to a plain-HTTP server.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
		if len(parts) != 6 || parts[0] != "api" || parts[3] != "" && parts[4] != "pods" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer test-token" {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		k.mu.Lock()
		p, ok := k.pods[parts[3]+"/"+parts[5]]
		k.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(corePod(p))
	}))
	t.Cleanup(srv.Close)
	ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	kc := filepath.Join(dir, "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: "` + srv.URL + `", certificate-authority-data: ` + ca + `}}]
users: [{name: cni, user: {token: test-token}}]
contexts: [{name: test, context: {cluster: test, user: cni}}]
current-context: test
`
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return kc
}

func sortedKeys(m map[string][]string) []string { return slices.Sorted(maps.Keys(m)) }
