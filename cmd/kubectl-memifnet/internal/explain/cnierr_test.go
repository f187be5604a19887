package explain

import (
	"strings"
	"testing"
)

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
