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

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/observe/events"
	"github.com/memifnet/memifnet/pkg/memif/portstatus"
)

// Driver serves a DeviceState to the kubelet (the DRA gRPC API, v1 and v1beta1, through
// k8s.io/dynamic-resource-allocation/kubeletplugin), publishes its ResourceSlices, and reports
// each prepared port in the claim's status.
type Driver struct {
	state  *DeviceState
	client kubernetes.Interface
	log    *slog.Logger
	events *events.Recorder // nil: no Events
	helper *kubeletplugin.Helper
	// publish replaces the node's ResourceSlices (the helper's PublishResources).
	publish func(context.Context, resourceslice.DriverResources) error
	// stopWatch ends WatchUnits and waits for it.
	stopWatch func()

	umu     sync.Mutex
	version uint64 // the state's tracker's version as last published
}

// Start registers the driver with the kubelet under the state's KubeletDir (plugins_registry/,
// and the driver's socket in plugins/<driver>/), publishes the node's devices, and re-checks
// withheld units until ctx ends.
func Start(ctx context.Context, state *DeviceState, client kubernetes.Interface) (*Driver, error) {
	opts := state.opts
	d := &Driver{state: state, client: client, log: opts.Log}
	dataDir := filepath.Join(opts.KubeletDir, "plugins", opts.DriverName)
	if err := os.MkdirAll(dataDir, 0o750); err != nil { // the helper listens there, it does not make it
		return nil, fmt.Errorf("dra: %w", err)
	}
	h, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.DriverName(opts.DriverName),
		kubeletplugin.NodeName(opts.NodeName),
		kubeletplugin.KubeClient(client),
		kubeletplugin.RegistrarDirectoryPath(filepath.Join(opts.KubeletDir, "plugins_registry")),
		kubeletplugin.PluginDataDirectoryPath(dataDir),
	)
	if err != nil {
		return nil, fmt.Errorf("dra: start kubelet plugin: %w", err)
	}
	d.helper = h
	d.publish = h.PublishResources
	d.events = events.NewRecorder(client, opts.NodeName, opts.DriverName, opts.Log)
	if err := d.publishUnits(ctx); err != nil {
		h.Stop()
		d.events.Shutdown()
		return nil, fmt.Errorf("dra: publish resource slices: %w", err)
	}
	wctx, cancel := context.WithCancel(ctx)
	var watching sync.WaitGroup
	watching.Go(func() { d.WatchUnits(wctx, opts.RecheckInterval) })
	watching.Go(func() { d.WatchLinks(wctx, portstatus.DefaultInterval) })
	d.stopWatch = func() { cancel(); watching.Wait() }
	return d, nil
}

// Stop ends the gRPC servers and the slice publisher; the slices stay (a restart publishes the
// same ones) and prepared claims stay prepared.
func (d *Driver) Stop() {
	d.stopWatch()
	d.helper.Stop()
	d.events.Shutdown()
}

// Registered is true once the kubelet accepted the registration.
func (d *Driver) Registered() bool {
	st := d.helper.RegistrationStatus()
	return st != nil && st.PluginRegistered
}

// PrepareResourceClaims implements kubeletplugin.DRAPlugin.
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	out := map[types.UID]kubeletplugin.PrepareResult{}
	for _, c := range claims {
		res, err := d.state.Prepare(c)
		if err != nil {
			d.log.Warn("dra: prepare failed", "claim", c.Namespace+"/"+c.Name, "err", err)
			out[c.UID] = kubeletplugin.PrepareResult{Err: err}
			d.SyncUnits(ctx) // a unit its scrub found held leaves the slices
			continue
		}
		var devs []kubeletplugin.Device
		for _, dev := range res.Claim.Devices {
			devs = append(devs, kubeletplugin.Device{
				Requests: []string{dev.Request}, PoolName: dev.Pool, DeviceName: dev.Name, CDIDeviceIDs: res.CDI[dev.Name],
			})
		}
		out[c.UID] = kubeletplugin.PrepareResult{Devices: devs}
		if err := d.reportStatus(ctx, c, res.Claim); err != nil {
			// The pods run without it: the status is for people and tools, port.json is the
			// contract. Say so and go on.
			d.log.Warn("dra: cannot report ports in the claim status", "claim", c.Namespace+"/"+c.Name, "err", err)
		}
	}
	return out, nil
}

// UnprepareResourceClaims implements kubeletplugin.DRAPlugin.
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := map[types.UID]error{}
	for _, c := range claims {
		out[c.UID] = d.state.Unprepare(string(c.UID))
		if out[c.UID] != nil {
			d.log.Warn("dra: unprepare failed", "claim", c.String(), "err", out[c.UID])
		}
	}
	d.SyncUnits(ctx) // a unit withheld now leaves the slices at once
	return out, nil
}

// HandleError implements kubeletplugin.DRAPlugin: background errors (publishing slices) are
// logged; all of them are retried by the helper.
func (d *Driver) HandleError(_ context.Context, err error, msg string) {
	d.log.Error("dra: "+msg, "err", err, "recoverable", errors.Is(err, kubeletplugin.ErrRecoverable))
}

// reportStatus writes one status.devices entry per device of the claim on this node: for a
// socket device its port's name, role and socket path in the container (data), and the port as
// standard networkData.
func (d *Driver) reportStatus(ctx context.Context, claim *resourceapi.ResourceClaim, c PreparedClaim) error {
	var want []resourceapi.AllocatedDeviceStatus
	for _, dev := range c.Devices {
		st := resourceapi.AllocatedDeviceStatus{Driver: d.state.opts.DriverName, Pool: dev.Pool, Device: dev.Name,
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Prepared",
				Message: "scrubbed and wired by memifnet", LastTransitionTime: metav1.Now()}}}
		if dev.Status != nil {
			b, err := json.Marshal(dev.Status)
			if err != nil {
				return err
			}
			st.Data = &runtime.RawExtension{Raw: b}
		}
		st.NetworkData = dev.Network
		want = append(want, st)
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := d.client.ResourceV1().ResourceClaims(claim.Namespace).Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != claim.UID {
			return fmt.Errorf("claim was replaced (uid %s, prepared %s)", cur.UID, claim.UID)
		}
		mergeStatus(cur, want)
		_, err = d.client.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
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
