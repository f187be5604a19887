// Package podresources asks the kubelet which memifnet.io/socket slots a pod holds, through its
// PodResources gRPC API (k8s.io/kubelet podresources/v1) with grpc-go and the kubelet's own
// types. docs/design.md ("Libraries") has the ADD latency this costs.
package podresources

import (
	"context"
	"errors"
	"fmt"
	"sort"

	api "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/memifnet/memifnet/cmd/internal/podresclient"
	"github.com/memifnet/memifnet/internal/names"
)

// Slots returns the pod's slot IDs in a deterministic order: containers in the order the kubelet
// reports them (the pod spec's), and each container's slots sorted by ID. Ports are mapped to
// slots in this order. It uses Get, which needs the KubeletPodResourcesGet feature, and falls
// back to List on any Get error (the gate is off, an older kubelet, or a kubelet that answers a
// pod it does not know with an error of no particular code).
func Slots(ctx context.Context, socket, namespace, name string) ([]string, error) {
	conn, c, err := podresclient.Dial(socket)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	pod, getErr := get(ctx, c, namespace, name)
	if getErr != nil {
		pod, err = list(ctx, c, namespace, name)
		if err != nil {
			// grpc reports an expired context as a status; keep it recognisable to callers.
			if ctx.Err() != nil {
				err = fmt.Errorf("%w (%v)", ctx.Err(), err)
			}
			return nil, fmt.Errorf("podresources %s: Get: %v; List: %w", socket, getErr, err)
		}
	}
	var slots []string
	seen := map[string]bool{}
	for _, ctr := range pod.GetContainers() {
		var ids []string
		for _, d := range ctr.GetDevices() {
			if d.GetResourceName() != names.SocketResource {
				continue
			}
			for _, id := range d.GetDeviceIds() {
				if !seen[id] {
					seen[id] = true
					ids = append(ids, id)
				}
			}
		}
		sort.Strings(ids)
		slots = append(slots, ids...)
	}
	return slots, nil
}

func get(ctx context.Context, c api.PodResourcesListerClient, namespace, name string) (*api.PodResources, error) {
	resp, err := c.Get(ctx, &api.GetPodResourcesRequest{PodNamespace: namespace, PodName: name})
	if err != nil {
		return nil, err
	}
	if resp.GetPodResources() == nil {
		return nil, errors.New("the Get response has no pod")
	}
	return resp.GetPodResources(), nil
}

// list returns the pod from List, or nil (no slots) if the kubelet does not have it.
func list(ctx context.Context, c api.PodResourcesListerClient, namespace, name string) (*api.PodResources, error) {
	resp, err := c.List(ctx, &api.ListPodResourcesRequest{})
	if err != nil {
		return nil, err
	}
	for _, p := range resp.GetPodResources() {
		if p.GetNamespace() == namespace && p.GetName() == name {
			return p, nil
		}
	}
	return nil, nil
}
