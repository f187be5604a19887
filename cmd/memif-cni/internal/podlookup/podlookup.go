// Package podlookup finds the pod's annotations: from the runtime's runtimeConfig, else from the
// kubelet's Pods API, else from the API server. The last two run in the memif-cni-podinfo helper
// (package podquery says why).
package podlookup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/memifnet/memifnet/cmd/internal/podquery"
	"github.com/memifnet/memifnet/internal/names"
)

// Pod identifies the pod from CNI_ARGS.
type Pod struct {
	Namespace, Name, UID string
}

// Source says where the annotations came from (for errors and tests).
type Source string

// Sources, in the order they are tried.
const (
	SourceRuntime   Source = "runtimeConfig"
	SourceKubelet   Source = podquery.SourceKubelet
	SourceAPIServer Source = podquery.SourceAPIServer
)

// Options are the places to ask.
type Options struct {
	// RuntimeAnnotations is runtimeConfig's io.kubernetes.cri.pod-annotations; nil if the runtime
	// did not pass the capability.
	RuntimeAnnotations map[string]string
	// KubeletURL is the kubelet's Pods API, asked only when the network config opts in
	// (insecureKubeletPodsAPI); "none" or "" to skip.
	KubeletURL string
	Kubeconfig string // "" to skip
	Timeout    time.Duration
}

// ErrNotFound means no source could be asked or none knew the pod.
var ErrNotFound = errors.New("pod annotations not found")

// Annotations returns the pod's annotations and where they came from.
func Annotations(ctx context.Context, pod Pod, o Options) (map[string]string, Source, error) {
	if o.RuntimeAnnotations != nil {
		return o.RuntimeAnnotations, SourceRuntime, nil
	}
	q := podquery.Query{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Kubeconfig: o.Kubeconfig,
		TimeoutSeconds: max(1, int(o.Timeout/time.Second))}
	if o.KubeletURL != "none" {
		q.KubeletURL = o.KubeletURL
	}
	var tried []string
	if q.KubeletURL != "" || q.Kubeconfig != "" {
		a, err := ask(ctx, q)
		if err != nil {
			return nil, "", err
		}
		if a.Found {
			return a.Annotations, Source(a.Source), nil
		}
		tried = a.Tried
	}
	if q.KubeletURL == "" {
		tried = append(tried, `kubelet Pods API: off ("insecureKubeletPodsAPI" not set)`)
	}
	if q.Kubeconfig == "" {
		tried = append(tried, "API server: no kubeconfig in the network config")
	}
	return nil, "", fmt.Errorf("%w for pod %s/%s: runtimeConfig has no %q (declare the capability); %s",
		ErrNotFound, pod.Namespace, pod.Name, "io.kubernetes.cri.pod-annotations", strings.Join(tried, "; "))
}

// ask runs the helper, found next to this binary.
func ask(ctx context.Context, q podquery.Query) (podquery.Answer, error) {
	self, err := os.Executable()
	if err != nil {
		return podquery.Answer{}, fmt.Errorf("find %s: %w", names.PodInfoHelper, err)
	}
	in, err := json.Marshal(q)
	if err != nil {
		return podquery.Answer{}, err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(filepath.Dir(self), names.PodInfoHelper))
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return podquery.Answer{}, fmt.Errorf("%s (installed next to memif-cni): %w: %s", cmd.Path, err, strings.TrimSpace(stderr.String()))
	}
	var a podquery.Answer
	if err := json.Unmarshal(stdout.Bytes(), &a); err != nil {
		return podquery.Answer{}, fmt.Errorf("%s answered %q: %w", cmd.Path, stdout.String(), err)
	}
	return a, nil
}
