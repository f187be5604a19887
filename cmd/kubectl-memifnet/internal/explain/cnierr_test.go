package explain

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

// cniTypesCodes is the CNI spec's codes by their names in libcni's types package.
var cniTypesCodes = map[string]uint{
	"ErrUnknown": types.ErrUnknown, "ErrIncompatibleCNIVersion": types.ErrIncompatibleCNIVersion,
	"ErrUnsupportedField": types.ErrUnsupportedField, "ErrUnknownContainer": types.ErrUnknownContainer,
	"ErrInvalidEnvironmentVariables": types.ErrInvalidEnvironmentVariables, "ErrIOFailure": types.ErrIOFailure,
	"ErrDecodingFailure": types.ErrDecodingFailure, "ErrInvalidNetworkConfig": types.ErrInvalidNetworkConfig,
	"ErrInvalidNetNS": types.ErrInvalidNetNS, "ErrTryAgainLater": types.ErrTryAgainLater, "ErrInternal": types.ErrInternal,
}

// TestCNIMessagesMatchPlugin holds cniCodes to memif-cni's sources: every error memif-cni makes
// (cniErr(code, "msg", ...) and types.NewError(code, "memif-cni: msg", ...)) has its message
// here with its code, and nothing here is stale. The runtime drops the code on its way to the
// pod's Event, so this table is how explain gets it back.
func TestCNIMessagesMatchPlugin(t *testing.T) {
	root := "../../../memif-cni/internal"
	fset := token.NewFileSet()
	var files []*ast.File
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		files = append(files, f)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	local := map[string]uint{} // the plugin's own codes: const ErrNoSlots uint = 101
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Values) == len(vs.Names) {
				for i, v := range vs.Values {
					if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.INT {
						c, _ := strconv.Atoi(lit.Value)
						local[vs.Names[i].Name] = uint(c)
					}
				}
			}
			return true
		})
	}
	code := func(e ast.Expr) (uint, bool) {
		switch x := e.(type) {
		case *ast.SelectorExpr:
			c, ok := cniTypesCodes[x.Sel.Name]
			return c, ok
		case *ast.Ident:
			c, ok := local[x.Name]
			return c, ok
		}
		return 0, false
	}
	found := map[string]uint{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 2 {
				return true
			}
			lit, ok := call.Args[1].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			msg, _ := strconv.Unquote(lit.Value)
			switch fn := call.Fun.(type) {
			case *ast.Ident:
				if fn.Name != "cniErr" {
					return true
				}
			case *ast.SelectorExpr:
				if fn.Sel.Name != "NewError" {
					return true
				}
				msg = strings.TrimPrefix(msg, "memif-cni: ")
			default:
				return true
			}
			c, ok := code(call.Args[0])
			if !ok {
				t.Errorf("%s: cannot resolve the code %v", fset.Position(call.Pos()), call.Args[0])
				return true
			}
			found[msg] = c
			if want, ok := cniCodes[msg]; !ok || want != c {
				t.Errorf("%s: memif-cni makes %q with code %d; cniCodes has %d (%v)", fset.Position(call.Pos()), msg, c, want, ok)
			}
			return true
		})
	}
	if len(found) < 10 {
		t.Fatalf("found only %d memif-cni errors: %v", len(found), found)
	}
	for msg := range cniCodes {
		if _, ok := found[msg]; !ok {
			t.Errorf("cniCodes has %q, which memif-cni no longer makes", msg)
		}
	}
}

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
