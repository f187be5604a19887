// Package config loads and validates the device plugin's YAML configuration
// (the format is a shared contract, see docs/design.md).
package config

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/memifnet/memifnet/cmd/internal/linkdir"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/tmpfs"
)

// MaxSocketSlots bounds socketSlots so that slot IDs stay short and a typo
// (an extra zero) cannot make the plugin create a million directories.
const MaxSocketSlots = 4096

// Config is the whole configuration file.
type Config struct {
	// SocketSlots is the number of memifnet.io/socket units on the node.
	SocketSlots int `json:"socketSlots"`
	// SlotLimits bound what one pod can store in one slot (each slot is its own tmpfs).
	SlotLimits tmpfs.Limits `json:"slotLimits"`
	// Pools are the hugepage pools, each advertised as memifnet.io/<name>.
	Pools []Pool `json:"pools"`
	// DRA is the Dynamic Resource Allocation driver's own share of the node (docs/dra.md).
	DRA DRA `json:"dra"`
}

// DRA configures the kubelet DRA plugin that runs in the same node agent. It owns its own slots
// (dra-slot-NNN) and pools, so a device is handed out by the device plugin or by DRA, never both.
type DRA struct {
	Enabled bool `json:"enabled"`
	// DriverName is the DRA driver name (default memifnet.io).
	DriverName string `json:"driverName"`
	// SocketSlots is the number of DRA socket-slot devices on the node.
	SocketSlots int `json:"socketSlots"`
	// Pools are DRA's hugepage pools; their names must differ from the device plugin's pools.
	Pools []Pool `json:"pools"`
	// LinkLimits bound each link directory's tmpfs, which the two pods of a link can write to
	// (as memif-cni's linkLimits; unset fields default to linkdir.DefaultLimits: see Links).
	LinkLimits tmpfs.Limits `json:"linkLimits"`
}

// Default slot limits (slotLimits: port.json, a socket and the link directory; they leave room
// for a few more files and keep a pod from filling the node's memory or disk through its slots),
// and the bounds a configuration may choose within. Link directories' are linkdir's.
var (
	DefaultSlotLimits = tmpfs.Limits{Size: 1 << 20, Inodes: 64}
	slotBounds        = tmpfs.Bounds{Min: tmpfs.Limits{Size: 64 << 10, Inodes: 8}, Max: tmpfs.Limits{Size: 1 << 30, Inodes: 1 << 20}}
)

// Pool is one hugepage pool. Sizes are Kubernetes-style quantities (2Mi, 1Gi).
type Pool struct {
	Name             string   `json:"name"`
	PageSize         Quantity `json:"pageSize"`
	UnitSize         Quantity `json:"unitSize"`
	UnitsPerNUMANode int      `json:"unitsPerNUMANode"`
}

// Quantity is a byte count written with a binary suffix (Ki, Mi, Gi) or none.
type Quantity struct {
	Bytes int64
	Text  string
}

// UnmarshalJSON accepts a string such as "64Mi" or a plain integer.
func (q *Quantity) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	n, err := tmpfs.ParseSize(s)
	if err != nil {
		return err
	}
	*q = Quantity{Bytes: int64(n), Text: s}
	return nil
}

// MarshalJSON writes the quantity back as text.
func (q Quantity) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(q.String())), nil
}

func (q Quantity) String() string {
	if q.Text != "" {
		return q.Text
	}
	return strconv.FormatInt(q.Bytes, 10)
}

// Default is used when no --config is given: the example of docs/design.md.
func Default() Config {
	return Config{
		SocketSlots: 64,
		SlotLimits:  DefaultSlotLimits,
		Pools: []Pool{{
			Name:             names.DefaultPool,
			PageSize:         Quantity{Bytes: 2 << 20, Text: "2Mi"},
			UnitSize:         Quantity{Bytes: 64 << 20, Text: "64Mi"},
			UnitsPerNUMANode: 4,
		}},
	}
}

// Load reads and validates a configuration file.
func Load(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read config: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes YAML strictly (unknown keys are errors naming the key) and
// validates the values.
func Parse(b []byte) (Config, error) {
	c := Config{SlotLimits: Default().SlotLimits}
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return Config{}, fmt.Errorf("parse: %w", err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// maxPoolNameLen keeps pool names, DNS labels, short as the name part of an extended resource
// and a file name.
const maxPoolNameLen = 32

// Validate checks values; each error names the key it is about.
func (c Config) Validate() error {
	var errs []error
	if c.SocketSlots < 0 || c.SocketSlots > MaxSocketSlots {
		errs = append(errs, fmt.Errorf("socketSlots: %d out of range 0..%d", c.SocketSlots, MaxSocketSlots))
	}
	errs = append(errs, c.SlotLimits.Check("slotLimits", slotBounds)...)
	seen := map[string]bool{}
	errs = append(errs, validatePools("pools", c.Pools, seen)...)
	if c.DRA.Enabled {
		errs = append(errs, c.DRA.validate(seen)...)
	}
	return errors.Join(errs...)
}

// driverNameRE is a DNS subdomain, as Kubernetes wants DRA driver names.
var driverNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$`)

func (d DRA) validate(seen map[string]bool) []error {
	var errs []error
	if d.DriverName != "" && (!driverNameRE.MatchString(d.DriverName) || !strings.Contains(d.DriverName, ".")) {
		errs = append(errs, fmt.Errorf("dra.driverName: %q must be a DNS subdomain with a dot, e.g. %s", d.DriverName, names.DRADriver))
	}
	if d.SocketSlots < 0 || d.SocketSlots > MaxSocketSlots {
		errs = append(errs, fmt.Errorf("dra.socketSlots: %d out of range 0..%d", d.SocketSlots, MaxSocketSlots))
	}
	if d.SocketSlots == 0 && len(d.Pools) == 0 {
		errs = append(errs, fmt.Errorf("dra.socketSlots: DRA is enabled but owns no slots and no pools"))
	}
	errs = append(errs, d.Links().Check("dra.linkLimits", linkdir.Bounds)...)
	return append(errs, validatePools("dra.pools", d.Pools, seen)...)
}

// Links are dra.linkLimits, a field left unset (zero) taking linkdir.DefaultLimits' value.
func (d DRA) Links() tmpfs.Limits { return d.LinkLimits.Or(linkdir.DefaultLimits) }

// Driver is the DRA driver name, defaulted.
func (d DRA) Driver() string {
	if d.DriverName == "" {
		return names.DRADriver
	}
	return d.DriverName
}

// validatePools checks pools; seen holds the names taken so far (pool directories are
// <stateDir>/pools/<name> for both backends, so names are unique across them).
func validatePools(field string, pools []Pool, seen map[string]bool) []error {
	var errs []error
	for i, p := range pools {
		key := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case p.Name == "":
			errs = append(errs, fmt.Errorf("%s.name: required", key))
		case p.Name == "socket":
			errs = append(errs, fmt.Errorf("%s.name: %q is taken by the socket slot resource", key, p.Name))
		case len(p.Name) > maxPoolNameLen || !names.IsDNSLabel(p.Name):
			errs = append(errs, fmt.Errorf("%s.name: %q must be lowercase letters, digits and '-', at most 32 characters", key, p.Name))
		case seen[p.Name]:
			errs = append(errs, fmt.Errorf("%s.name: duplicate pool %q (pool names are unique across pools and dra.pools)", key, p.Name))
		}
		seen[p.Name] = true
		if p.PageSize.Bytes != 2<<20 && p.PageSize.Bytes != 1<<30 {
			errs = append(errs, fmt.Errorf("%s.pageSize: %q must be 2Mi or 1Gi", key, p.PageSize))
		}
		switch {
		case p.UnitSize.Bytes <= 0:
			errs = append(errs, fmt.Errorf("%s.unitSize: required and positive", key))
		case p.PageSize.Bytes > 0 && p.UnitSize.Bytes%p.PageSize.Bytes != 0:
			errs = append(errs, fmt.Errorf("%s.unitSize: %q is not a multiple of pageSize %q", key, p.UnitSize, p.PageSize))
		}
		if p.UnitsPerNUMANode < 0 || p.UnitsPerNUMANode > 1000 {
			errs = append(errs, fmt.Errorf("%s.unitsPerNUMANode: %d out of range 0..1000", key, p.UnitsPerNUMANode))
		}
	}
	return errs
}
