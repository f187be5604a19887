package config

import (
	"strings"
	"testing"

	"github.com/memifnet/memifnet/internal/names"
)

func TestParseDefaultsAndRuntimeConfig(t *testing.T) {
	c, err := Parse([]byte(`{"cniVersion":"1.1.0","name":"n","type":"memif-cni",
		"ipam":{"type":"host-local","ranges":[[{"subnet":"10.0.0.0/24"}]]},
		"runtimeConfig":{"io.kubernetes.cri.pod-annotations":{"a":"b"},"portMappings":[]}}`), true)
	if err != nil {
		t.Fatal(err)
	}
	if c.StateDir != names.StateDir || c.KubeletDir != names.KubeletDir || c.IPAMType != "host-local" ||
		c.RuntimeConfig.PodAnnotations["a"] != "b" || c.TimeoutSeconds != 10 {
		t.Fatalf("%+v", c)
	}
}

func TestParseStrictness(t *testing.T) {
	bad := `{"cniVersion":"1.1.0","name":"n","type":"memif-cni","stateDri":"/x"}`
	if _, err := Parse([]byte(bad), true); err == nil || !strings.Contains(err.Error(), `unknown field "stateDri"`) {
		t.Fatalf("strict: %v", err)
	}
	if _, err := Parse([]byte(bad), false); err != nil {
		t.Fatalf("lenient (DEL) parse must accept unknown keys: %v", err)
	}
	if e := Error("x"); e.Code != 7 {
		t.Fatalf("code %d", e.Code)
	}
}

// Multus adds deviceID and pciBusID to a delegate whose NetworkAttachmentDefinition names a
// device-plugin resource (seen on the e2e tier 3 cluster, Multus v4.2.2); strict parsing must take
// them.
func TestParseMultusDeviceKeys(t *testing.T) {
	c, err := Parse([]byte(`{"cniVersion":"1.1.0","name":"memif","type":"memif-cni","capabilities":{"CNIDeviceInfoFile":true},
		"deviceID":"slot-015","kubeconfig":"/etc/cni/net.d/memifnet.d/memifnet.kubeconfig","pciBusID":"slot-015"}`), true)
	if err != nil || c.DeviceID != "slot-015" {
		t.Fatalf("%+v %v", c, err)
	}
}

func TestParseArgs(t *testing.T) {
	a, err := ParseArgs("IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_UID=u;K8S_POD_INFRA_CONTAINER_ID=c")
	if err != nil || a != (K8sArgs{Namespace: "ns", Name: "p", UID: "u", InfraContainerID: "c"}) {
		t.Fatalf("%+v %v", a, err)
	}
	if _, err := ParseArgs("junk"); err == nil {
		t.Fatal("CNI_ARGS without = accepted")
	}
}
