package portspec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/memifnet/memifnet/internal/names"
)

// Where an application finds its ports. This package is the public spelling of these names of
// internal/names (code outside the module cannot import that), so its constants re-export them.
const (
	// DefaultDir is where the device plugin mounts the pod's socket slots and where the CNI
	// plugin writes one FileName per slot.
	DefaultDir = names.ContainerDir
	// FileName is the port spec's file in a slot directory.
	FileName = names.PortFile
)

// Environment variables of the in-pod contract.
const (
	// EnvDir overrides DefaultDir (tests, or a pod that mounts the slots elsewhere).
	EnvDir = names.EnvDir
	// EnvPools lists the hugepage pool unit files the device plugin granted, comma-separated.
	EnvPools = names.EnvPools
	// EnvSockets lists the socket slot IDs the device plugin granted, comma-separated; each is a
	// directory under DefaultDir.
	EnvSockets = names.EnvSockets
)

// Discover returns the ports memif-cni wired for this pod, read from $MEMIFNET_DIR or
// /run/memifnet. See DiscoverDir.
func Discover() ([]PortSpec, error) { return DiscoverDir(Dir()) }

// Dir is the directory Discover reads: $MEMIFNET_DIR, or DefaultDir.
func Dir() string {
	if dir := os.Getenv(EnvDir); dir != "" {
		return dir
	}
	return DefaultDir
}

// DiscoverDir reads every <dir>/*/port.json, sorted by port name. A slot without port.json is
// skipped (the pod holds more slots than it asked ports for, or the directory is a pool
// directory); a port.json that does not parse is an error naming the file, since silently
// dropping a port would leave the app half-wired. A missing dir gives no ports and no error, so
// an app can run outside Kubernetes too.
func DiscoverDir(dir string) ([]PortSpec, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*", FileName))
	if err != nil {
		return nil, fmt.Errorf("memif discover %s: %w", dir, err)
	}
	var specs []PortSpec
	var errs []error
	seen := map[string]string{}
	for _, f := range files {
		s, err := Read(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed by a concurrent DEL
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, ok := seen[s.Name]; ok {
			errs = append(errs, fmt.Errorf("memif port spec %s: field \"name\": %q is also used by %s", f, s.Name, prev))
			continue
		}
		seen[s.Name] = f
		specs = append(specs, s)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	sort.Slice(specs, func(a, b int) bool { return specs[a].Name < specs[b].Name })
	return specs, nil
}

// Lookup returns the spec named name.
func Lookup(specs []PortSpec, name string) (PortSpec, bool) {
	for _, s := range specs {
		if s.Name == name {
			return s, true
		}
	}
	return PortSpec{}, false
}

// PoolFiles lists the hugepage pool unit files named by $MEMIFNET_POOLS.
func PoolFiles() []string { return splitPools(os.Getenv(EnvPools)) }

// splitPools splits a $MEMIFNET_POOLS value into its file names, dropping empty items.
func splitPools(list string) []string {
	var out []string
	for _, p := range strings.Split(list, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
