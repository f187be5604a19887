// Package config parses memif-cni's network configuration and the Kubernetes CNI_ARGS. Parsing is
// strict: an unknown key or a bad value is a CNI error 7 naming it, found before any side effect.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/memifnet/memifnet/cmd/internal/cnierr"
	"github.com/memifnet/memifnet/cmd/internal/linkdir"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/tmpfs"
)

// Defaults of the path settings (stateDir and kubeletDir default to names.StateDir and
// names.KubeletDir). Every path is overridable so that tests (and unusual nodes)
// can point the plugin elsewhere.
const (
	DefaultDevInfoDir = "/var/run/k8s.cni.cncf.io/devinfo"
	DefaultKubeletURL = "https://127.0.0.1:10250"
)

// PodAnnotationsKey is the runtimeConfig capability containerd (>= 1.5) and CRI-O (>= 1.29) fill
// with the pod sandbox's annotations.
const PodAnnotationsKey = "io.kubernetes.cri.pod-annotations"

// NetConf is the plugin's network configuration. The standard keys are spelled out rather than
// embedding types.NetConf, because strict decoding would otherwise reject the IPAM plugin's own
// keys (ipam.ranges and so on), which belong to the delegate.
type NetConf struct {
	CNIVersion       string               `json:"cniVersion"`
	Name             string               `json:"name"`
	Type             string               `json:"type"`
	Capabilities     map[string]bool      `json:"capabilities,omitempty"`
	IPAM             json.RawMessage      `json:"ipam,omitempty"`
	DNS              json.RawMessage      `json:"dns,omitempty"`
	Args             json.RawMessage      `json:"args,omitempty"`
	RawPrevResult    json.RawMessage      `json:"prevResult,omitempty"`
	RawRuntimeConfig json.RawMessage      `json:"runtimeConfig,omitempty"`
	ValidAttachments []types.GCAttachment `json:"cni.dev/valid-attachments,omitempty"`
	// Attachments is the misspelt key libcni also sends on GC (containernetworking/cni#1101).
	Attachments []types.GCAttachment `json:"cni.dev/attachments,omitempty"`
	// DeviceID and PCIBusID are what Multus adds to a network whose NetworkAttachmentDefinition
	// names a device-plugin resource (k8s.v1.cni.cncf.io/resourceName): one device of that
	// resource the pod holds (a slot). Informational: the slots come from PodResources.
	DeviceID string `json:"deviceID,omitempty"`
	PCIBusID string `json:"pciBusID,omitempty"`

	// StateDir holds sockets/ (slots, made by the device plugin), links/ and state/.
	StateDir string `json:"stateDir,omitempty"`
	// KubeletDir holds pod-resources/kubelet.sock.
	KubeletDir string `json:"kubeletDir,omitempty"`
	// DeviceInfoDir holds the NPWG device-info files; the plugin writes under cni/.
	DeviceInfoDir string `json:"deviceInfoDir,omitempty"`
	// InsecureKubeletPodsAPI turns on the lookup of the pod's annotations in the kubelet's Pods
	// API (GET <kubeletURL>/pods): anonymous, the kubelet's certificate not verified, so it works
	// only where kubelet authentication is off, which no hardened cluster allows. Off by
	// default; Parse then sets KubeletURL to "none".
	InsecureKubeletPodsAPI bool `json:"insecureKubeletPodsAPI,omitempty"`
	// KubeletURL is the kubelet's HTTPS endpoint for the Pods API, with InsecureKubeletPodsAPI
	// only (default DefaultKubeletURL); "none" without it.
	KubeletURL string `json:"kubeletURL,omitempty"`
	// Kubeconfig lets the plugin ask the API server for the pod (the Multus case).
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// TimeoutSeconds bounds each lookup (Pods API, API server, PodResources). Default 10.
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
	// LinkLimits bound each link directory's tmpfs (the two pods of a link can write there).
	LinkLimits LinkLimits `json:"linkLimits,omitzero"`

	RuntimeConfig RuntimeConfig `json:"-"`
	IPAMType      string        `json:"-"`
}

// LinkLimits are the size and inode limits of one link directory (a link holds the server's
// socket; linkdir.DefaultLimits leave room for a few more files). The key takes tmpfs.Limits'
// form, {"size": "64Ki", "inodes": 16}, and memif-cni's first spelling of the size, "bytes" (a
// byte count), which Parse folds into Size.
type LinkLimits struct {
	tmpfs.Limits
	Bytes int64 `json:"bytes,omitzero"`
}

// RuntimeConfig is what the runtime passes for the capabilities the plugin declares. It is
// decoded leniently: the runtime, not the user, writes it, and other capabilities may be there.
type RuntimeConfig struct {
	// PodAnnotations is nil when the runtime did not pass the capability, which is not the same
	// as a pod without annotations.
	PodAnnotations map[string]string `json:"io.kubernetes.cri.pod-annotations,omitempty"`
	DeviceInfoFile string            `json:"CNIDeviceInfoFile,omitempty"`
	DeviceID       string            `json:"deviceID,omitempty"`
}

// Error is a CNI invalid-config error (code 7).
func Error(format string, a ...any) *types.Error { return Err(cnierr.InvalidConfig, format, a...) }

// Err is an error of memif-cni's catalogue (cmd/internal/cnierr), which kubectl-memifnet reads
// back, with its details.
func Err(k cnierr.Kind, format string, a ...any) *types.Error {
	return types.NewError(k.Code, cnierr.Prefix+k.Msg, fmt.Sprintf(format, a...))
}

// Parse decodes and checks stdin. strict rejects unknown keys; DEL parses leniently so that a
// pod whose ADD failed on a config typo can still be torn down.
func Parse(data []byte, strict bool) (*NetConf, error) {
	c := &NetConf{}
	dec := json.NewDecoder(bytes.NewReader(data))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(c); err != nil {
		return nil, Error("%s", describeJSONError(err))
	}
	if len(c.RawRuntimeConfig) > 0 && string(c.RawRuntimeConfig) != "null" {
		if err := json.Unmarshal(c.RawRuntimeConfig, &c.RuntimeConfig); err != nil {
			return nil, Error("runtimeConfig: %s", describeJSONError(err))
		}
	}
	if len(c.IPAM) > 0 && string(c.IPAM) != "null" {
		var ipam struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(c.IPAM, &ipam); err != nil {
			return nil, Error("ipam: %s", describeJSONError(err))
		}
		if ipam.Type == "" {
			return nil, Error(`field "ipam.type": missing; name the IPAM plugin (host-local, static, ...) or drop "ipam"`)
		}
		c.IPAMType = ipam.Type
	}
	if c.StateDir == "" {
		c.StateDir = names.StateDir
	}
	if c.KubeletDir == "" {
		c.KubeletDir = names.KubeletDir
	}
	if c.DeviceInfoDir == "" {
		c.DeviceInfoDir = DefaultDevInfoDir
	}
	if c.TimeoutSeconds == 0 {
		c.TimeoutSeconds = 10
	}
	var errs []string
	errs = append(errs, c.kubeletPodsAPI(strict)...)
	errs = append(errs, c.LinkLimits.resolve()...)
	for _, p := range []struct{ field, path string }{
		{"stateDir", c.StateDir}, {"kubeletDir", c.KubeletDir}, {"deviceInfoDir", c.DeviceInfoDir},
	} {
		if !filepath.IsAbs(p.path) {
			errs = append(errs, fmt.Sprintf("field %q: %q must be an absolute path", p.field, p.path))
		}
	}
	if c.Kubeconfig != "" && !filepath.IsAbs(c.Kubeconfig) {
		errs = append(errs, fmt.Sprintf("field \"kubeconfig\": %q must be an absolute path", c.Kubeconfig))
	}
	if c.TimeoutSeconds < 0 || c.TimeoutSeconds > 300 {
		errs = append(errs, fmt.Sprintf("field \"timeoutSeconds\": %d must be 1..300", c.TimeoutSeconds))
	}
	if len(errs) > 0 {
		return nil, Error("%s", strings.Join(errs, "; "))
	}
	return c, nil
}

// kubeletPodsAPI resolves KubeletURL: "none" unless InsecureKubeletPodsAPI opts in. A URL set
// without the opt-in is an error on ADD and CHECK (strict), naming both keys; DEL, which needs no
// annotations, ignores it so that a pod set up under an older config can still be deleted.
func (c *NetConf) kubeletPodsAPI(strict bool) []string {
	switch {
	case !c.InsecureKubeletPodsAPI && c.KubeletURL != "" && c.KubeletURL != "none" && strict:
		return []string{fmt.Sprintf(`field "kubeletURL": %q is set, but the kubelet Pods API is off: it is asked anonymously without verifying the kubelet's certificate, and works only where kubelet authentication is off; set "insecureKubeletPodsAPI": true to use it, or remove "kubeletURL" (give "kubeconfig" instead)`, c.KubeletURL)}
	case !c.InsecureKubeletPodsAPI:
		c.KubeletURL = "none"
	case c.KubeletURL == "none":
		return []string{`field "kubeletURL": "none" contradicts "insecureKubeletPodsAPI": true`}
	case c.KubeletURL == "":
		c.KubeletURL = DefaultKubeletURL
	case !strings.HasPrefix(c.KubeletURL, "https://") && !strings.HasPrefix(c.KubeletURL, "http://"):
		return []string{fmt.Sprintf(`field "kubeletURL": %q must be an http(s) URL`, c.KubeletURL)}
	}
	return nil
}

// resolve folds bytes into size, fills unset limits from linkdir.DefaultLimits and checks them
// against linkdir.Bounds, naming the key as the config spells it.
func (l *LinkLimits) resolve() []string {
	if l.Bytes != 0 {
		if l.Size != 0 {
			return []string{`field "linkLimits.bytes": set together with "linkLimits.size"; both are the size, set one`}
		}
		l.Size = tmpfs.Size(l.Bytes)
	}
	l.Limits = l.Limits.Or(linkdir.DefaultLimits)
	var errs []string
	for _, err := range l.Check("linkLimits", linkdir.Bounds) {
		re := err.(*tmpfs.RangeError)
		key, value := re.Name(), re.Value
		if re.Field == "size" && l.Bytes != 0 {
			key, value = "linkLimits.bytes", strconv.FormatInt(l.Bytes, 10)
		}
		errs = append(errs, fmt.Sprintf("field %q: %s must be %s..%s", key, value, re.Min, re.Max))
	}
	return errs
}

// describeJSONError turns encoding/json's errors into "field X: ..." messages.
func describeJSONError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("field %q: got a JSON %s, want %s", te.Field, te.Value, te.Type)
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return msg
}

// SlotsDir holds the device plugin's slot directories.
func (c *NetConf) SlotsDir() string { return filepath.Join(c.StateDir, names.SocketsSubdir) }

// LinksDir holds one directory per link, bind-mounted into both pods' slots.
func (c *NetConf) LinksDir() string { return filepath.Join(c.StateDir, names.LinksSubdir) }

// StoreDir holds the plugin's records.
func (c *NetConf) StoreDir() string { return filepath.Join(c.StateDir, names.StoreSubdir) }

// PodResourcesSocket is the kubelet's PodResources gRPC socket.
func (c *NetConf) PodResourcesSocket() string {
	return filepath.Join(c.KubeletDir, names.PodResourcesSocket)
}

// K8sArgs are the pod identity the runtime passes in CNI_ARGS.
type K8sArgs struct {
	Namespace, Name, UID, InfraContainerID string
}

// ParseArgs reads K8S_POD_* from CNI_ARGS ("A=1;B=2"). Unknown keys are ignored: runtimes add
// their own (IgnoreUnknown and others).
func ParseArgs(s string) (K8sArgs, error) {
	var a K8sArgs
	if s == "" {
		return a, nil
	}
	for _, kv := range strings.Split(s, ";") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return a, Err(cnierr.InvalidArgs, "%q is not KEY=VALUE", kv)
		}
		switch k {
		case "K8S_POD_NAMESPACE":
			a.Namespace = v
		case "K8S_POD_NAME":
			a.Name = v
		case "K8S_POD_UID":
			a.UID = v
		case "K8S_POD_INFRA_CONTAINER_ID":
			a.InfraContainerID = v
		}
	}
	return a, nil
}
