// Package podresources asks the kubelet which memifnet.io/socket slots a pod holds.
//
// It speaks the kubelet's PodResources gRPC API (k8s.io/kubelet podresources/v1) over a minimal
// HTTP/2 client of its own (grpc.go, response.go: prior knowledge on the Unix socket, one stream
// per connection, hpack from golang.org/x/net) and a hand-written decoder for the few messages it
// needs (wire.go), instead of grpc-go and the generated types: those two add about 20 ms to the
// start of every plugin process (package init and binary size), which is most of the ADD latency
// budget. Not net/http's HTTP/2 either: its client cost ADD another 2-3 ms of start-up (docs/cni.md,
// "Tests and measurements"). The tests run this client against a grpc-go server built from the real
// generated types, and against scripted HTTP/2 servers written with x/net/http2's framer.
package podresources

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/memifnet/memifnet/internal/names"
)

// Slots returns the pod's slot IDs in a deterministic order: containers in the order the kubelet
// reports them (the pod spec's), and each container's slots sorted by ID. Ports are mapped to
// slots in this order. It uses Get, which needs the KubeletPodResourcesGet feature, and falls
// back to List on any Get error (the gate is off, or an older kubelet).
func Slots(ctx context.Context, socket, namespace, name string) ([]string, error) {
	c := newClient(socket)
	pod, getErr := get(ctx, c, namespace, name)
	if getErr != nil {
		var err error
		pod, err = list(ctx, c, namespace, name)
		if err != nil {
			return nil, fmt.Errorf("podresources %s: Get: %v; List: %w", socket, getErr, err)
		}
	}
	if pod == nil {
		return nil, nil
	}
	var slots []string
	seen := map[string]bool{}
	for _, ctr := range pod.containers {
		var ids []string
		for _, d := range ctr.devices {
			if d.resourceName != names.SocketResource {
				continue
			}
			for _, id := range d.deviceIDs {
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

func get(ctx context.Context, c *client, namespace, name string) (*podResources, error) {
	resp, err := c.call(ctx, "/v1.PodResourcesLister/Get", encodeGetRequest(name, namespace))
	if err != nil {
		return nil, err
	}
	pod, err := decodeGetResponse(resp)
	if err != nil {
		return nil, fmt.Errorf("decode the Get response: %w", err)
	}
	if pod == nil {
		return nil, errors.New("the Get response has no pod")
	}
	return pod, nil
}

func list(ctx context.Context, c *client, namespace, name string) (*podResources, error) {
	resp, err := c.call(ctx, "/v1.PodResourcesLister/List", nil)
	if err != nil {
		return nil, err
	}
	pods, err := decodeListResponse(resp)
	if err != nil {
		return nil, fmt.Errorf("decode the List response: %w", err)
	}
	for i := range pods {
		if pods[i].namespace == namespace && pods[i].name == name {
			return &pods[i], nil
		}
	}
	return nil, nil
}
