// Package metricsauth guards the node agent's /metrics on the node address the way
// kube-rbac-proxy and controller-runtime's metrics filters do: the caller's bearer token is
// checked with a TokenReview, then the user it names is checked with a SubjectAccessReview for
// the non-resource URL (/metrics, verb get); the answers are cached briefly in a bounded cache.
// It also makes the listener's TLS configuration (cert.go). It talks to the API server with
// client-go only: the agent's service account needs create tokenreviews and
// subjectaccessreviews (the ClusterRole system:auth-delegator).
package metricsauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// How long a decision is reused, and how many are kept: an allowed token for a minute (a
// revoked binding takes effect within it), a refused one for ten seconds (a token flood costs
// the API server at most one review per distinct token and TTL).
const (
	AllowedTTL  = time.Minute
	DeniedTTL   = 10 * time.Second
	MaxEntries  = 1024
	MaxInFlight = 8                // reviews under way at once; more wait for a free one
	ReviewLimit = 10 * time.Second // one review's bound
)

// ReaderRole is the ClusterRole the manifests ship for the users who may read /metrics.
const ReaderRole = "memifnet-metrics-reader"

// Guard authenticates and authorizes requests for one non-resource URL.
type Guard struct {
	client   kubernetes.Interface
	path     string
	log      *slog.Logger
	cache    *cache
	inFlight chan struct{}
}

// New returns a Guard of path (such as /metrics) asking the API server through client.
func New(client kubernetes.Interface, path string, log *slog.Logger) *Guard {
	return &Guard{client: client, path: path, log: log, cache: newCache(MaxEntries, time.Now), inFlight: make(chan struct{}, MaxInFlight)}
}

// decision is what the reviews said about one token: status 200, 401 or 403 and why.
type decision struct {
	code int
	msg  string
}

// Wrap serves next to the requests whose token names a user allowed to get g's path: no token
// or one the API server does not accept is 401, a user not allowed is 403, a review that
// cannot be made is 503 (and not cached). Methods other than GET and HEAD are 405.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		token, ok := bearer(r)
		if !ok {
			g.refuse(w, decision{http.StatusUnauthorized, "Unauthorized: no bearer token (" + g.path + " needs an Authorization: Bearer token of a user allowed to get it, e.g. bound to the ClusterRole " + ReaderRole + ")"})
			return
		}
		d, err := g.decide(r.Context(), token)
		if err != nil {
			g.log.Warn("metrics: cannot review a token", "err", err)
			http.Error(w, "cannot review the token with the API server: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		if d.code != http.StatusOK {
			g.refuse(w, d)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (g *Guard) refuse(w http.ResponseWriter, d decision) {
	if d.code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="memif-deviceplugin"`)
	}
	http.Error(w, d.msg, d.code)
}

// bearer is the request's bearer token.
func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "bearer") && token != ""
}

// decide returns the cached decision about token, or asks the API server.
func (g *Guard) decide(ctx context.Context, token string) (decision, error) {
	key := sha256.Sum256([]byte(token)) // the token itself is never kept
	if d, ok := g.cache.get(key); ok {
		return d, nil
	}
	select {
	case g.inFlight <- struct{}{}:
		defer func() { <-g.inFlight }()
	case <-ctx.Done():
		return decision{}, ctx.Err()
	}
	ctx, cancel := context.WithTimeout(ctx, ReviewLimit)
	defer cancel()
	d, err := g.review(ctx, token)
	if err != nil {
		return decision{}, err
	}
	ttl := DeniedTTL
	if d.code == http.StatusOK {
		ttl = AllowedTTL
	}
	g.cache.put(key, d, ttl)
	return d, nil
}

// review asks the API server who token is, then whether that user may get g.path.
func (g *Guard) review(ctx context.Context, token string) (decision, error) {
	tr, err := g.client.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return decision{}, fmt.Errorf("TokenReview: %w", err)
	}
	if !tr.Status.Authenticated {
		return decision{http.StatusUnauthorized, "Unauthorized: the API server does not accept the token"}, nil
	}
	u := tr.Status.User
	if u.Username == "" {
		return decision{}, errors.New("TokenReview: authenticated, but no user name")
	}
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	sar, err := g.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: g.path, Verb: "get"},
	}}, metav1.CreateOptions{})
	if err != nil {
		return decision{}, fmt.Errorf("SubjectAccessReview: %w", err)
	}
	if !sar.Status.Allowed {
		return decision{http.StatusForbidden, fmt.Sprintf("Forbidden: user %q may not get %s (bind it to the ClusterRole %s)", u.Username, g.path, ReaderRole)}, nil
	}
	return decision{http.StatusOK, ""}, nil
}
