package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/memifnet/memifnet/cmd/internal/linkdir"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/tmpfs"
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

// linkLimits: unset limits take linkdir.DefaultLimits; the size is "bytes" (memif-cni's first
// spelling, a byte count) or "size" (tmpfs.Limits' form, a quantity); bad values name the key as
// the config spells it.
func TestParseLinkLimits(t *testing.T) {
	conf := func(limits string) []byte {
		return []byte(`{"cniVersion":"1.1.0","name":"n","type":"memif-cni","linkLimits":` + limits + `}`)
	}
	for in, want := range map[string]tmpfs.Limits{
		`{}`:                               linkdir.DefaultLimits,
		`{"bytes":131072,"inodes":32}`:     {Size: 128 << 10, Inodes: 32},
		`{"size":"128Ki"}`:                 {Size: 128 << 10, Inodes: linkdir.DefaultLimits.Inodes},
		`{"size":8192,"inodes":4}`:         {Size: 8 << 10, Inodes: 4},
		`{"inodes":4096,"bytes":16777216}`: {Size: 16 << 20, Inodes: 4096},
	} {
		c, err := Parse(conf(in), true)
		if err != nil || c.LinkLimits.Limits != want {
			t.Errorf("linkLimits %s: %+v, %v; want %+v", in, c, err, want)
		}
	}
	if c, err := Parse([]byte(`{"cniVersion":"1.1.0","name":"n","type":"memif-cni"}`), true); err != nil || c.LinkLimits.Limits != linkdir.DefaultLimits {
		t.Errorf("no linkLimits: %+v, %v; want linkdir.DefaultLimits", c, err)
	}
	for in, want := range map[string]string{
		`{"bytes":1}`:                 `field "linkLimits.bytes": 1 must be 4Ki..16Mi`,
		`{"size":"1Gi"}`:              `field "linkLimits.size": "1Gi" must be 4Ki..16Mi`,
		`{"inodes":5000}`:             `field "linkLimits.inodes": 5000 must be 4..4096`,
		`{"bytes":8192,"size":"8Ki"}`: `field "linkLimits.bytes": set together with "linkLimits.size"`,
		`{"bytes":"64Ki"}`:            `field "linkLimits.bytes": got a JSON string`,
		`{"size":"64KB"}`:             `bad quantity "64KB"`,
		`{"byte":4096}`:               `unknown field "byte"`,
	} {
		_, err := Parse(conf(in), true)
		var te *types.Error
		if !errors.As(err, &te) || te.Code != types.ErrInvalidNetworkConfig || !strings.Contains(err.Error(), want) {
			t.Errorf("linkLimits %s: %v, want a code 7 error containing %q", in, err, want)
		}
	}
	if _, err := Parse(conf(`{"byte":4096}`), false); err != nil {
		t.Errorf("lenient (DEL) parse must accept unknown keys in linkLimits: %v", err)
	}
}

// The kubelet Pods API (anonymous, certificate unverified) is opt-in (security row 41): off by
// default; a kubeletURL without the opt-in is refused on ADD and CHECK naming both keys, and
// ignored on DEL; the opt-in takes the default URL or a given one.
func TestParseKubeletPodsAPIOptIn(t *testing.T) {
	const head = `{"cniVersion":"1.1.0","name":"n","type":"memif-cni"`
	for _, tc := range []struct {
		conf   string
		strict bool
		url    string // "" if refused
		errHas string
	}{
		{head + `}`, true, "none", ""},
		{head + `,"kubeletURL":"none"}`, true, "none", ""},
		{head + `,"kubeletURL":"https://127.0.0.1:10250"}`, true, "", `field "kubeletURL": "https://127.0.0.1:10250" is set, but the kubelet Pods API is off`},
		{head + `,"kubeletURL":"https://127.0.0.1:10250"}`, false, "none", ""},
		{head + `,"insecureKubeletPodsAPI":true}`, true, DefaultKubeletURL, ""},
		{head + `,"insecureKubeletPodsAPI":true,"kubeletURL":"https://10.0.0.1:10250"}`, true, "https://10.0.0.1:10250", ""},
		{head + `,"insecureKubeletPodsAPI":true,"kubeletURL":"none"}`, true, "", `"none" contradicts "insecureKubeletPodsAPI": true`},
		{head + `,"insecureKubeletPodsAPI":true,"kubeletURL":"ftp://x"}`, true, "", `"ftp://x" must be an http(s) URL`},
	} {
		c, err := Parse([]byte(tc.conf), tc.strict)
		switch {
		case tc.url == "" && (err == nil || !strings.Contains(err.Error(), tc.errHas)):
			t.Errorf("%s (strict %v): %v, want an error saying %q", tc.conf, tc.strict, err, tc.errHas)
		case tc.url != "" && (err != nil || c.KubeletURL != tc.url):
			t.Errorf("%s (strict %v): %+v %v, want kubeletURL %q", tc.conf, tc.strict, c, err, tc.url)
		}
	}
}
