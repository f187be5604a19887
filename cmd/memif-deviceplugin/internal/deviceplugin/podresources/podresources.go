// Package podresources asks the kubelet's PodResources API which devices
// pods hold, so that the others can be scrubbed in the background and
// Allocate seldom has to scrub.
package podresources

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/memifnet/memifnet/cmd/internal/podresclient"
)

// Reclaimer is a resource whose free devices can be scrubbed.
type Reclaimer interface {
	Name() string
	Reclaim(ctx context.Context, inUse map[string]bool, listedAt time.Time, grace time.Duration) int
}

// Client polls List.
type Client struct {
	conn *grpc.ClientConn
	api  podresourcesapi.PodResourcesListerClient
	log  *slog.Logger
}

// New makes a client for the socket at path (dialled lazily, so the kubelet
// may come later or restart).
func New(path string, log *slog.Logger) (*Client, error) {
	conn, api, err := podresclient.Dial(path)
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn, api: api, log: log}, nil
}

// Close ends the connection.
func (c *Client) Close() error { return c.conn.Close() }

// InUse lists the device IDs pods hold, per resource name.
func (c *Client) InUse(ctx context.Context) (map[string]map[string]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := c.api.List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("list pod resources: %w", err)
	}
	out := map[string]map[string]bool{}
	for _, pod := range resp.GetPodResources() {
		for _, ctr := range pod.GetContainers() {
			for _, d := range ctr.GetDevices() {
				m := out[d.GetResourceName()]
				if m == nil {
					m = map[string]bool{}
					out[d.GetResourceName()] = m
				}
				for _, id := range d.GetDeviceIds() {
					m[id] = true
				}
			}
		}
	}
	return out, nil
}

// Reclaim runs one pass: List, then scrub what no pod holds.
func (c *Client) Reclaim(ctx context.Context, rs []Reclaimer, grace time.Duration) error {
	listedAt := time.Now()
	inUse, err := c.InUse(ctx)
	if err != nil {
		return err
	}
	for _, r := range rs {
		r.Reclaim(ctx, inUse[r.Name()], listedAt, grace)
	}
	return nil
}

// Run reclaims every interval until ctx ends. While the API does not
// answer nothing is scrubbed in the background: Allocate still scrubs.
func (c *Client) Run(ctx context.Context, rs []Reclaimer, interval, grace time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	failing := false
	for {
		err := c.Reclaim(ctx, rs, grace)
		switch {
		case err != nil && !failing:
			c.log.Warn("pod resources api unavailable, scrubbing only at allocate", "err", err)
			failing = true
		case err == nil && failing:
			c.log.Info("pod resources api answers again")
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// PodRef names a pod.
type PodRef struct{ Namespace, Name string }

// DRAPods maps each device of driver that a pod's container holds through a ResourceClaim to
// that pod (the kubelet's view, by device name: a slot is on one node, in one claim at a time).
// It needs the kubelet's KubeletPodResourcesDynamicResources (beta, on by default since 1.34);
// without it the map is empty.
func (c *Client) DRAPods(ctx context.Context, driver string) (map[string]PodRef, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := c.api.List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("list pod resources: %w", err)
	}
	out := map[string]PodRef{}
	for _, pod := range resp.GetPodResources() {
		for _, ctr := range pod.GetContainers() {
			for _, dr := range ctr.GetDynamicResources() {
				for _, cr := range dr.GetClaimResources() {
					if cr.GetDriverName() == driver && cr.GetDeviceName() != "" {
						out[cr.GetDeviceName()] = PodRef{Namespace: pod.GetNamespace(), Name: pod.GetName()}
					}
				}
			}
		}
	}
	return out, nil
}
