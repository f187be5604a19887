// Package authtest is a stand-in for the API server's TokenReview and SubjectAccessReview
// endpoints, for tests: an httptest server that decodes the requests client-go sends and
// answers with the API's JSON, from a table of tokens and allowed users.
package authtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// APIServer answers reviews: a token in Tokens authenticates as its user; a user in Allowed
// may get the non-resource path Path.
type APIServer struct {
	Path string

	mu      sync.Mutex
	tokens  map[string]string
	allowed map[string]bool
	reviews map[string]int // kind -> requests
	srv     *httptest.Server
}

// New starts an APIServer for path, closed at the end of the test.
func New(t testing.TB, path string) *APIServer {
	a := &APIServer{Path: path, tokens: map[string]string{}, allowed: map[string]bool{}, reviews: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /apis/authentication.k8s.io/v1/tokenreviews", a.tokenReview)
	mux.HandleFunc("POST /apis/authorization.k8s.io/v1/subjectaccessreviews", a.accessReview)
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

// User makes token authenticate as user, allowed to get the path or not.
func (a *APIServer) User(token, user string, allowed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tokens[token], a.allowed[user] = user, allowed
}

// Reviews is how many reviews of kind ("TokenReview", "SubjectAccessReview") were asked.
func (a *APIServer) Reviews(kind string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reviews[kind]
}

// Client is a client-go clientset of the stand-in, speaking JSON (the clientset's default is
// protobuf, which the stand-in does not decode).
func (a *APIServer) Client() kubernetes.Interface {
	return kubernetes.NewForConfigOrDie(&rest.Config{Host: a.srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
}

func (a *APIServer) tokenReview(w http.ResponseWriter, r *http.Request) {
	var tr authnv1.TokenReview
	if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
		http.Error(w, "bad TokenReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	a.reviews["TokenReview"]++
	user, ok := a.tokens[tr.Spec.Token]
	a.mu.Unlock()
	tr.APIVersion, tr.Kind = "authentication.k8s.io/v1", "TokenReview"
	tr.Status = authnv1.TokenReviewStatus{Authenticated: ok}
	if ok {
		tr.Status.User = authnv1.UserInfo{Username: user, UID: "uid-" + user, Groups: []string{"system:authenticated"}}
	} else {
		tr.Status.Error = "invalid bearer token"
	}
	answer(w, &tr)
}

func (a *APIServer) accessReview(w http.ResponseWriter, r *http.Request) {
	var sar authzv1.SubjectAccessReview
	if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
		http.Error(w, "bad SubjectAccessReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	a.reviews["SubjectAccessReview"]++
	sar.APIVersion, sar.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
	nr := sar.Spec.NonResourceAttributes
	sar.Status.Allowed = a.allowed[sar.Spec.User] && sar.Spec.ResourceAttributes == nil && nr != nil && nr.Path == a.Path && nr.Verb == "get"
	a.mu.Unlock()
	answer(w, &sar)
}

// answer writes obj as the API server does: its kind and version set.
func answer(w http.ResponseWriter, obj any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(obj)
}
