// Package podresclient dials the kubelet's PodResources API (k8s.io/kubelet podresources/v1) on
// its Unix socket: memif-cni asks it which slots a pod holds, the node agent which devices pods
// hold. One dial, so that both read the kubelet's answers with the same limits.
package podresclient

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	api "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// MaxMessage bounds a response: List on a busy node is the largest answer, a few hundred bytes
// per pod. grpc-go's default receive limit is 4 MiB; the kubelet allows itself up to 16 MiB, so
// do we.
const MaxMessage = 16 << 20

// Dial makes a client for the socket at path. The connection is made at the first call (so the
// kubelet may come later or restart); a call fails at once while the socket does not answer.
// The caller closes conn.
func Dial(path string) (conn *grpc.ClientConn, c api.PodResourcesListerClient, err error) {
	conn, err = grpc.NewClient("unix://"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessage)))
	if err != nil {
		return nil, nil, fmt.Errorf("pod resources client for %s: %w", path, err)
	}
	return conn, api.NewPodResourcesListerClient(conn), nil
}
