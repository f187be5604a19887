package dra

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// Plugin serves a Driver to the kubelet (the DRA gRPC API, v1 and v1beta1, through
// k8s.io/dynamic-resource-allocation/kubeletplugin), publishes its ResourceSlices, and reports
// each prepared port in the claim's status.
type Plugin struct {
	d      *Driver
	client kubernetes.Interface
	log    *slog.Logger
	helper *kubeletplugin.Helper
	// publish replaces the node's ResourceSlices (the helper's PublishResources).
	publish   func(context.Context, resourceslice.DriverResources) error
	slotBytes int64

	umu       sync.Mutex
	published map[string]error // the withheld units as last published
}

// Start registers the plugin with the kubelet under kubeletDir (plugins_registry/, and the
// plugin's socket in plugins/<driver>/) and publishes the node's devices.
func Start(ctx context.Context, d *Driver, client kubernetes.Interface, kubeletDir string, slotBytes int64) (*Plugin, error) {
	p := &Plugin{d: d, client: client, log: d.opts.Log, slotBytes: slotBytes}
	dataDir := filepath.Join(kubeletDir, "plugins", d.opts.DriverName)
	if err := os.MkdirAll(dataDir, 0o750); err != nil { // the helper listens there, it does not make it
		return nil, fmt.Errorf("dra: %w", err)
	}
	h, err := kubeletplugin.Start(ctx, p,
		kubeletplugin.DriverName(d.opts.DriverName),
		kubeletplugin.NodeName(d.opts.NodeName),
		kubeletplugin.KubeClient(client),
		kubeletplugin.RegistrarDirectoryPath(filepath.Join(kubeletDir, "plugins_registry")),
		kubeletplugin.PluginDataDirectoryPath(dataDir),
	)
	if err != nil {
		return nil, fmt.Errorf("dra: start kubelet plugin: %w", err)
	}
	p.helper = h
	p.publish = h.PublishResources
	if err := p.publishUnits(ctx); err != nil {
		h.Stop()
		return nil, fmt.Errorf("dra: publish resource slices: %w", err)
	}
	return p, nil
}

// Stop ends the gRPC servers and the slice publisher; the slices stay (a restart publishes the
// same ones) and prepared claims stay prepared.
func (p *Plugin) Stop() { p.helper.Stop() }

// Registered is true once the kubelet accepted the registration.
func (p *Plugin) Registered() bool {
	st := p.helper.RegistrationStatus()
	return st != nil && st.PluginRegistered
}

// PrepareResourceClaims implements kubeletplugin.DRAPlugin.
func (p *Plugin) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	out := map[types.UID]kubeletplugin.PrepareResult{}
	for _, c := range claims {
		res, err := p.d.Prepare(c)
		if err != nil {
			p.log.Warn("dra: prepare failed", "claim", c.Namespace+"/"+c.Name, "err", err)
			out[c.UID] = kubeletplugin.PrepareResult{Err: err}
			p.SyncUnits(ctx) // a unit its scrub found held leaves the slices
			continue
		}
		var devs []kubeletplugin.Device
		for _, dev := range res.Claim.Devices {
			devs = append(devs, kubeletplugin.Device{
				Requests: []string{dev.Request}, PoolName: dev.Pool, DeviceName: dev.Name, CDIDeviceIDs: res.CDI[dev.Name],
			})
		}
		out[c.UID] = kubeletplugin.PrepareResult{Devices: devs}
		if err := p.reportStatus(ctx, c, res.Claim); err != nil {
			// The pods run without it: the status is for people and tools, port.json is the
			// contract. Say so and go on.
			p.log.Warn("dra: cannot report ports in the claim status", "claim", c.Namespace+"/"+c.Name, "err", err)
		}
	}
	return out, nil
}

// UnprepareResourceClaims implements kubeletplugin.DRAPlugin.
func (p *Plugin) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := map[types.UID]error{}
	for _, c := range claims {
		out[c.UID] = p.d.Unprepare(string(c.UID))
		if out[c.UID] != nil {
			p.log.Warn("dra: unprepare failed", "claim", c.String(), "err", out[c.UID])
		}
	}
	p.SyncUnits(ctx) // a unit withheld now leaves the slices at once
	return out, nil
}

// HandleError implements kubeletplugin.DRAPlugin: background errors (publishing slices) are
// logged; all of them are retried by the helper.
func (p *Plugin) HandleError(_ context.Context, err error, msg string) {
	p.log.Error("dra: "+msg, "err", err, "recoverable", errors.Is(err, kubeletplugin.ErrRecoverable))
}

// StatusData is the data of a socket device in the claim's status.devices.
type StatusData struct {
	Port   string `json:"port"`
	Role   string `json:"role"`
	Socket string `json:"socket"`
	Link   string `json:"link,omitempty"`
	// HostSocket is a host port's socket on the node, where the host data plane serves.
	HostSocket string `json:"hostSocket,omitempty"`
}

// reportStatus writes one status.devices entry per device of the claim on this node: for a
// socket device its port's name, role and socket path in the container.
func (p *Plugin) reportStatus(ctx context.Context, claim *resourceapi.ResourceClaim, c Claim) error {
	var want []resourceapi.AllocatedDeviceStatus
	for _, dev := range c.Devices {
		st := resourceapi.AllocatedDeviceStatus{Driver: p.d.opts.DriverName, Pool: dev.Pool, Device: dev.Name,
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Prepared",
				Message: "scrubbed and wired by memifnet", LastTransitionTime: metav1.Now()}}}
		if dev.Port != nil {
			b, err := json.Marshal(StatusData{Port: dev.Port.Name, Role: dev.Port.Role, Socket: dev.Port.Socket, Link: dev.Port.Link, HostSocket: dev.Port.HostSocket})
			if err != nil {
				return err
			}
			st.Data = &runtime.RawExtension{Raw: b}
		}
		want = append(want, st)
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := p.client.ResourceV1().ResourceClaims(claim.Namespace).Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != claim.UID {
			return fmt.Errorf("claim was replaced (uid %s, prepared %s)", cur.UID, claim.UID)
		}
		mergeStatus(cur, want)
		_, err = p.client.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// mergeStatus replaces the entries of want's devices in the claim's status and keeps the rest
// (other drivers', other nodes'). A device that already has an entry keeps its condition times.
func mergeStatus(claim *resourceapi.ResourceClaim, want []resourceapi.AllocatedDeviceStatus) {
	key := func(s resourceapi.AllocatedDeviceStatus) string { return s.Driver + "/" + s.Pool + "/" + s.Device }
	idx := map[string]int{}
	for i, s := range claim.Status.Devices {
		idx[key(s)] = i
	}
	for _, w := range want {
		if i, ok := idx[key(w)]; ok {
			if len(claim.Status.Devices[i].Conditions) > 0 {
				w.Conditions = claim.Status.Devices[i].Conditions
			}
			claim.Status.Devices[i] = w
			continue
		}
		claim.Status.Devices = append(claim.Status.Devices, w)
	}
}
