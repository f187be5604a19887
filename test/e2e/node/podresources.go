package node

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresources "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/testutil"
)

// Allocatable asks a PodResources socket which devices of resource the node offers.
func Allocatable(ctx context.Context, sock, resource string) ([]string, error) {
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	r, err := podresources.NewPodResourcesListerClient(conn).GetAllocatableResources(ctx, &podresources.AllocatableResourcesRequest{})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, d := range r.Devices {
		if d.ResourceName == resource {
			ids = append(ids, d.DeviceIds...)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// PodDevices asks a PodResources socket which devices of resource pod namespace/name holds.
func PodDevices(ctx context.Context, sock, namespace, name, resource string) ([]string, error) {
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	r, err := podresources.NewPodResourcesListerClient(conn).Get(ctx, &podresources.GetPodResourcesRequest{PodName: name, PodNamespace: namespace})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, c := range r.PodResources.GetContainers() {
		for _, d := range c.Devices {
			if d.ResourceName == resource {
				ids = append(ids, d.DeviceIds...)
			}
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// Leftovers lists what a pod's CNI attachment may leave behind and must not once every DEL
// ran: mounts on slots, port.json files, link directories and records, attachment records,
// device-info files of the CNI.
func (s *Stack) Leftovers() ([]string, error) { return LeftoversIn(s.StateDir(), s.DevInfoDir()) }

// LeftoversIn is Leftovers for the state dir and device-info root of any node (the cluster's are
// /var/lib/memifnet and /var/run/k8s.cni.cncf.io/devinfo).
func LeftoversIn(stateDir, devInfoDir string) ([]string, error) {
	var out []string
	sockets := filepath.Join(stateDir, names.SocketsSubdir)
	for _, d := range []string{sockets, filepath.Join(stateDir, names.LinksSubdir)} {
		mps, err := testutil.Mounts(d)
		if err != nil {
			return nil, err
		}
		for _, mp := range mps {
			// Each slot is a tmpfs of the device plugin's own (sockets/<slot>); what a pod's
			// attachment mounts lies below it (the link) or under links/.
			if rel, err := filepath.Rel(sockets, mp); err == nil && !strings.HasPrefix(rel, "..") &&
				(rel == "." || !strings.Contains(rel, "/")) {
				continue
			}
			out = append(out, "mount "+mp)
		}
	}
	ports, _ := filepath.Glob(filepath.Join(stateDir, names.SocketsSubdir, "*", names.PortFile))
	for _, p := range ports {
		out = append(out, "file "+p)
	}
	for _, d := range []string{
		filepath.Join(stateDir, names.LinksSubdir),
		filepath.Join(stateDir, names.StoreSubdir),
		filepath.Join(devInfoDir, "cni"),
	} {
		err := filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return nil
				}
				return err
			}
			if !e.IsDir() {
				out = append(out, "file "+p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// SlotEntries lists a slot directory's entries (names), for "the next pod sees nothing".
func (s *Stack) SlotEntries(slot string) ([]string, error) {
	es, err := os.ReadDir(filepath.Join(s.StateDir(), names.SocketsSubdir, slot))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names, nil
}
