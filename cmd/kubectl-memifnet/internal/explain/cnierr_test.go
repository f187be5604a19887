package explain

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// TestWebhookReason keeps EventLinkPeerNodeFull the webhook's Event reason.
func TestWebhookReason(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../../../memif-webhook/internal/explain/explain.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Names) == 1 && vs.Names[0].Name == "Reason" && len(vs.Values) == 1 {
			if lit, ok := vs.Values[0].(*ast.BasicLit); ok {
				got, _ = strconv.Unquote(lit.Value)
			}
		}
		return true
	})
	if got != EventLinkPeerNodeFull {
		t.Errorf("the webhook's Event reason is %q, this plugin reads %q", got, EventLinkPeerNodeFull)
	}
}

func TestParseCNIError(t *testing.T) {
	// As the kubelet records it from containerd (kuberuntime: "Failed to create pod sandbox: %v").
	ev := `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "0d1f": ` +
		`plugin type="memif-cni" name="k8s-pod-network" failed (add): memif-cni: link conflict; pod ns/c port 0 (north): ` +
		`field "link": link "l" already joins pods a and b`
	ce, ok := ParseCNIError(ev)
	if !ok || ce.Code != 102 || ce.Msg != "link conflict" || !strings.HasPrefix(ce.Details, "pod ns/c port 0 (north)") || ce.Hint == "" {
		t.Errorf("%+v %v", ce, ok)
	}
	ce, ok = ParseCNIError(`... failed (add): memif-cni: something new; x`)
	if !ok || ce.Code != 0 || ce.Msg != "something new" {
		t.Errorf("unknown message: %+v %v", ce, ok)
	}
	if _, ok := ParseCNIError(`failed to setup network for sandbox: plugin type="bridge" failed (add): no IP`); ok {
		t.Error("another plugin's error taken for memif-cni's")
	}
}
