// Package portmetrics exports the per-port metrics of the memif pods on this node: each port's
// application reports its link state and counters in <slot>/status.json (pkg/memif/portstatus);
// the node agent reads those files as hostile input and labels them with what its own state says
// the slot is (namespace, pod, port, link), never with what the file says.
package portmetrics

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/memifnet/memifnet/cmd/internal/cniattach"
	"github.com/memifnet/memifnet/internal/names"
)

// Port is one pod's port in a socket slot, as the node's own state records it.
type Port struct {
	Namespace string
	Pod       string
	Port      string
	Link      string // "" for a host port
	// Claim is the DRA claim whose link (or host port) this is; "" for memif-cni's ports. A DRA
	// link is its claim (both ends are its devices), whatever free text its "link" parameter
	// holds, so it never shares a key with memif-cni's link of that name, nor with another claim.
	Claim string
	Slot  string // the slot's directory under <state>/sockets
}

// Source lists the ports in use on the node.
type Source func() ([]Port, error)

// maxRecord bounds an attachment record read (a real one is well under 4 KiB).
const maxRecord = 1 << 20

// CNIPorts lists the device plugin's ports from memif-cni's attachment records
// (cmd/internal/cniattach) under <stateDir>/state/attachments. A record being written or
// removed meanwhile is skipped. The records are root's (<state>/state is not reachable from a
// pod); fields this reader does not need are decoded and ignored.
func CNIPorts(stateDir string) Source {
	dir := filepath.Join(stateDir, names.StoreSubdir, cniattach.Subdir)
	return func() ([]Port, error) {
		ents, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("port metrics: list attachments: %w", err)
		}
		var out []Port
		for _, e := range ents {
			if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".json") {
				continue
			}
			a, err := readAttachment(filepath.Join(dir, e.Name()))
			if err != nil {
				continue // removed by a DEL meanwhile, or not ours to judge
			}
			for _, p := range a.Ports {
				if p.Slot == "" || strings.ContainsRune(p.Slot, '/') {
					continue
				}
				out = append(out, Port{Namespace: a.Namespace, Pod: a.Pod, Port: p.Name, Link: p.Link, Slot: p.Slot})
			}
		}
		return out, nil
	}
}

func readAttachment(path string) (cniattach.Attachment, error) {
	f, err := os.Open(path)
	if err != nil {
		return cniattach.Attachment{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxRecord))
	if err != nil {
		return cniattach.Attachment{}, err
	}
	var a cniattach.Attachment
	if err := json.Unmarshal(b, &a); err != nil {
		return cniattach.Attachment{}, err
	}
	return a, nil
}

// Merge lists the ports of every source, sorted by slot; a failing source's error is returned
// with the ports of the others.
func Merge(srcs ...Source) Source {
	return func() ([]Port, error) {
		var out []Port
		var errs []error
		for _, s := range srcs {
			ps, err := s()
			out = append(out, ps...)
			if err != nil {
				errs = append(errs, err)
			}
		}
		sort.Slice(out, func(a, b int) bool { return out[a].Slot < out[b].Slot })
		return out, errors.Join(errs...)
	}
}
