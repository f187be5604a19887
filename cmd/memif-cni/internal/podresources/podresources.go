// Package podresources asks the kubelet which memifnet.io/socket slots a pod holds.
package podresources

import (
	"context"
	"fmt"
	"sort"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	api "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// SocketResource is the device plugin's slot resource.
const SocketResource = "memifnet.io/socket"

// Slots returns the pod's slot IDs in a deterministic order: containers in the order the kubelet
// reports them (the pod spec's), and each container's slots sorted by ID. Ports are mapped to
// slots in this order. It uses Get, which needs the KubeletPodResourcesGet feature, and falls
// back to List on any Get error (the gate is off, or an older kubelet).
func Slots(ctx context.Context, socket, namespace, name string) ([]string, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("podresources %s: %w", socket, err)
	}
	defer conn.Close()
	c := api.NewPodResourcesListerClient(conn)
	var pod *api.PodResources
	got, getErr := c.Get(ctx, &api.GetPodResourcesRequest{PodName: name, PodNamespace: namespace})
	if getErr == nil {
		pod = got.GetPodResources()
	} else {
		list, err := c.List(ctx, &api.ListPodResourcesRequest{})
		if err != nil {
			return nil, fmt.Errorf("podresources %s: Get: %v; List: %w", socket, getErr, err)
		}
		for _, p := range list.GetPodResources() {
			if p.GetNamespace() == namespace && p.GetName() == name {
				pod = p
				break
			}
		}
	}
	if pod == nil {
		return nil, nil
	}
	var slots []string
	seen := map[string]bool{}
	for _, c := range pod.GetContainers() {
		var ids []string
		for _, d := range c.GetDevices() {
			if d.GetResourceName() != SocketResource {
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
