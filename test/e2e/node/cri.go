package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/memifnet/memifnet/internal/safefs"
)

// CRI is a client of containerd's CRI service.
type CRI struct {
	Runtime cri.RuntimeServiceClient
	Images  cri.ImageServiceClient
	Version string
	conn    *grpc.ClientConn
}

// DialCRI connects and checks the runtime answers Version.
func DialCRI(ctx context.Context, sock string) (*CRI, error) {
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	c := &CRI{Runtime: cri.NewRuntimeServiceClient(conn), Images: cri.NewImageServiceClient(conn), conn: conn}
	vctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	v, err := c.Runtime.Version(vctx, &cri.VersionRequest{})
	if err != nil {
		conn.Close()
		return nil, err
	}
	c.Version = v.RuntimeName + " " + v.RuntimeVersion
	return c, nil
}

// Close closes the connection.
func (c *CRI) Close() error { return c.conn.Close() }

// RemoveAll stops and removes every pod sandbox (each Stop and Remove makes the runtime call CNI
// DEL) and closes the connection. The stack owns this containerd, so every sandbox is its own.
func (c *CRI) RemoveAll(ctx context.Context) error {
	if c == nil {
		return nil
	}
	defer c.conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	list, err := c.Runtime.ListPodSandbox(ctx, &cri.ListPodSandboxRequest{})
	if err != nil {
		return err
	}
	var errs []error
	for _, sb := range list.Items {
		if _, err := c.Runtime.StopPodSandbox(ctx, &cri.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, err)
		}
		if _, err := c.Runtime.RemovePodSandbox(ctx, &cri.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Sandboxes lists the sandboxes whose pod name (the io.kubernetes.pod.name label the kubelet
// sets, or the metadata name) is name.
func (c *CRI) Sandboxes(ctx context.Context, name string) ([]*cri.PodSandbox, error) {
	list, err := c.Runtime.ListPodSandbox(ctx, &cri.ListPodSandboxRequest{})
	if err != nil {
		return nil, err
	}
	var out []*cri.PodSandbox
	for _, sb := range list.Items {
		if sb.Metadata.GetName() == name {
			out = append(out, sb)
		}
	}
	return out, nil
}

// ContainerOf finds the container named cname in the sandbox.
func (c *CRI) ContainerOf(ctx context.Context, sandboxID, cname string) (*cri.ContainerStatus, error) {
	list, err := c.Runtime.ListContainers(ctx, &cri.ListContainersRequest{Filter: &cri.ContainerFilter{PodSandboxId: sandboxID}})
	if err != nil {
		return nil, err
	}
	var newest *cri.Container
	for _, ct := range list.Containers {
		if ct.Metadata.GetName() == cname && (newest == nil || ct.CreatedAt > newest.CreatedAt) {
			newest = ct
		}
	}
	if newest == nil {
		return nil, fmt.Errorf("no container %q in sandbox %.12s", cname, sandboxID)
	}
	st, err := c.Runtime.ContainerStatus(ctx, &cri.ContainerStatusRequest{ContainerId: newest.Id})
	if err != nil {
		return nil, err
	}
	return st.Status, nil
}

// Log is a container's output, decoded from the CRI log format ("<time> <stream> <P|F> <text>").
func Log(st *cri.ContainerStatus) (string, error) {
	b, err := os.ReadFile(st.LogPath)
	if err != nil {
		return "", err
	}
	var sb strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, " ", 4)
		if len(f) < 4 {
			continue
		}
		sb.WriteString(f[3])
		if f[2] == "F" {
			sb.WriteByte('\n')
		}
	}
	return sb.String(), nil
}

// Summary parses memif-perf's last "rx_pkts=... " line of a log.
func Summary(log string) (map[string]float64, bool) {
	lines := strings.Split(strings.TrimSpace(log), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "rx_pkts=") {
			out := map[string]float64{}
			for _, kv := range strings.Fields(lines[i]) {
				k, v, _ := strings.Cut(kv, "=")
				var f float64
				fmt.Sscan(v, &f)
				out[k] = f
			}
			return out, true
		}
	}
	return nil, false
}

// LastProgressRx is rx_pkts of memif-perf's newest per-second progress line, or -1.
func LastProgressRx(log string) float64 {
	lines := strings.Split(strings.TrimSpace(log), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "[") {
			if _, rest, ok := strings.Cut(lines[i], "rx_pkts="); ok {
				var f float64
				fmt.Sscan(strings.Fields(rest)[0], &f)
				return f
			}
		}
	}
	return -1
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return safefs.WriteFile(path, append(b, '\n'), 0o644, safefs.WriteOptions{})
}
