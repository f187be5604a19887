package metricsauth

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/observe/metricsauth/authtest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func get(t *testing.T, h http.Handler, method, auth string) (int, http.Header, string) {
	t.Helper()
	r := httptest.NewRequest(method, "/metrics", nil)
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Header(), w.Body.String()
}

// TestGuard: a request reaches the endpoint only with a token the API server authenticates
// (TokenReview) of a user it authorizes for get /metrics (SubjectAccessReview); each refusal
// has its status and says why; decisions are reused.
func TestGuard(t *testing.T) {
	api := authtest.New(t, "/metrics")
	api.User("good", "system:serviceaccount:monitoring:prometheus", true)
	api.User("nosy", "system:serviceaccount:tenant:app", false)
	g := New(api.Client(), "/metrics", quiet)
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("the metrics\n")) }))
	cases := []struct {
		name, method, auth string
		code               int
		body               string
	}{
		{"no token", "GET", "", 401, "no bearer token"},
		{"not bearer", "GET", "Basic Zm9vOmJhcg==", 401, "no bearer token"},
		{"empty bearer", "GET", "Bearer ", 401, "no bearer token"},
		{"token the API server rejects", "GET", "Bearer forged", 401, "does not accept the token"},
		{"user not allowed", "GET", "Bearer nosy", 403, `"system:serviceaccount:tenant:app" may not get /metrics`},
		{"allowed", "GET", "Bearer good", 200, "the metrics"},
		{"allowed, scheme in lower case", "GET", "bearer good", 200, "the metrics"},
		{"POST", "POST", "Bearer good", 405, "method not allowed"},
	}
	for _, tc := range cases {
		code, hdr, body := get(t, h, tc.method, tc.auth)
		if code != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("%s: %d %q, want %d with %q", tc.name, code, body, tc.code, tc.body)
		}
		if code == 401 && !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: 401 without WWW-Authenticate: Bearer", tc.name)
		}
	}
	if n, s := api.Reviews("TokenReview"), api.Reviews("SubjectAccessReview"); n != 3 || s != 2 {
		t.Errorf("%d token reviews and %d access reviews, want 3 and 2 (each token once, then cached)", n, s)
	}
}

// TestGuardAPIServerDown: a review that cannot be made is 503 with the reason, and is asked
// again at the next request (not cached as a refusal).
func TestGuardAPIServerDown(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	g := New(kubernetes.NewForConfigOrDie(&rest.Config{Host: dead.URL}), "/metrics", quiet)
	h := g.Wrap(http.NotFoundHandler())
	for range 2 {
		if code, _, body := get(t, h, "GET", "Bearer x"); code != 503 || !strings.Contains(body, "TokenReview") {
			t.Fatalf("%d %q, want 503 naming the TokenReview", code, body)
		}
	}
	if g.cache.len() != 0 {
		t.Fatal("a failed review was cached")
	}
}

// TestCacheBound: however many distinct tokens callers send, the cache holds at most its bound,
// and a decision expires after its TTL.
func TestCacheBound(t *testing.T) {
	now := time.Unix(0, 0)
	c := newCache(16, func() time.Time { return now })
	for i := range 1000 {
		c.put([32]byte{byte(i), byte(i >> 8)}, decision{code: 401}, DeniedTTL)
		if c.len() > 16 {
			t.Fatalf("%d entries after %d puts, bound 16", c.len(), i+1)
		}
	}
	k := [32]byte{1, 2, 3}
	c.put(k, decision{code: 200}, AllowedTTL)
	if d, ok := c.get(k); !ok || d.code != 200 {
		t.Fatalf("fresh entry: %v %v", d, ok)
	}
	now = now.Add(AllowedTTL)
	if _, ok := c.get(k); ok {
		t.Fatal("an entry outlived its TTL")
	}
}
