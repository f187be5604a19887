package podapi

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/memifnet/memifnet/cmd/internal/podquery"
)

// The API-server lookup reads the one pod by name and says who it is (the audit log and the
// e2e tier 3 tell memif-cni's reads from the kubelet's by it: both use the node's credentials
// under Multus).
func TestLookupAPIServer(t *testing.T) {
	var ua, path string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ua, path = r.UserAgent(), r.URL.Path
		_, _ = io.WriteString(w, `{"metadata":{"name":"p","namespace":"ns","uid":"u1","annotations":{"a":"b"}}}`)
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ca64 := base64.StdEncoding.EncodeToString(caPEM(srv))
	kc := write(t, dir, "kc", "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"+
		"clusters: [{name: k, cluster: {server: '"+srv.URL+"', certificate-authority-data: "+ca64+"}}]\nusers: [{name: u, user: {token: t}}]\n")
	a := Lookup(t.Context(), podquery.Query{Namespace: "ns", Name: "p", UID: "u1", Kubeconfig: kc, TimeoutSeconds: 5})
	if !a.Found || a.Source != SourceAPIServer || a.Annotations["a"] != "b" {
		t.Fatalf("%+v", a)
	}
	if ua != UserAgent || path != "/api/v1/namespaces/ns/pods/p" {
		t.Errorf("User-Agent %q, path %q", ua, path)
	}
	if a := Lookup(t.Context(), podquery.Query{Namespace: "ns", Name: "p", UID: "other", Kubeconfig: kc, TimeoutSeconds: 5}); a.Found {
		t.Errorf("a pod of another uid: %+v", a)
	}
}
