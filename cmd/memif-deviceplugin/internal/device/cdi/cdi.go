// Package cdi writes Container Device Interface spec files, the modern
// alternative to returning mounts from Allocate: the runtime reads the spec
// and the plugin returns only device names. The spec's types and the rules it
// is checked by are the CDI project's (tags.cncf.io/container-device-interface,
// what containerd and CRI-O read specs with); the file is written through
// safefs, not the project's writer (see WriteNamed).
package cdi

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	cdilib "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
	specs "tags.cncf.io/container-device-interface/specs-go"

	"github.com/memifnet/memifnet/internal/safefs"
)

// DefaultDir is the runtimes' default spec directory.
const DefaultDir = "/var/run/cdi"

// Version is the CDI spec version written; 0.5.0 is what containerd 1.7
// and CRI-O 1.28 understand.
const Version = "0.5.0"

// The spec's types: the CDI project's, named here so that callers need not import it.
type (
	// Spec is a CDI spec file.
	Spec = specs.Spec
	// Device is one named device.
	Device = specs.Device
	// ContainerEdits are the changes a device makes to a container.
	ContainerEdits = specs.ContainerEdits
	// Mount is a bind mount.
	Mount = specs.Mount
)

// Writer writes specs into Dir.
type Writer struct {
	Dir string
}

// QualifiedName is how Allocate names a device: <vendor>/<class>=<name>, kind being
// <vendor>/<class>.
func QualifiedName(kind, name string) string {
	vendor, class := parser.ParseQualifier(kind)
	return parser.QualifiedName(vendor, class, name)
}

// Validate checks a spec by the rules the runtimes' CDI parser reads it by: its version supports
// what it uses, its kind is <vendor>/<class> by the name rules, device names are well formed and
// unique, and every edit is well formed. A spec that fails would be refused at container start.
func Validate(s *Spec) error {
	if err := specs.ValidateVersion(s); err != nil {
		return err
	}
	vendor, class := parser.ParseQualifier(s.Kind)
	if err := parser.ValidateVendorName(vendor); err != nil {
		return fmt.Errorf("kind %q: %w", s.Kind, err)
	}
	if err := parser.ValidateClassName(class); err != nil {
		return fmt.Errorf("kind %q: %w", s.Kind, err)
	}
	if err := (&cdilib.ContainerEdits{ContainerEdits: &s.ContainerEdits}).Validate(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i := range s.Devices {
		d := &s.Devices[i]
		if err := parser.ValidateDeviceName(d.Name); err != nil {
			return err
		}
		if seen[d.Name] {
			return fmt.Errorf("device %q named twice", d.Name)
		}
		seen[d.Name] = true
		if err := (&cdilib.ContainerEdits{ContainerEdits: &d.ContainerEdits}).Validate(); err != nil {
			return fmt.Errorf("device %q: %w", d.Name, err)
		}
	}
	return nil
}

// Write saves the spec of kind, replacing an older one atomically.
func (w Writer) Write(s Spec) error {
	return w.WriteNamed(strings.ReplaceAll(s.Kind, "/", "-"), s)
}

// WriteNamed saves the spec as <Dir>/<name>.json, replacing an older one atomically: a driver
// that writes one spec per claim (DRA) names the file after the claim. The spec is validated
// first. The file goes through safefs, not the CDI project's Cache.WriteSpec: that one resolves
// the path (symlinks followed) and does not fsync, where this one is durable once it returns
// (a spec lost in a crash would fail the container start it was written for).
func (w Writer) WriteNamed(name string, s Spec) error {
	s.Version = Version
	if err := Validate(&s); err != nil {
		return fmt.Errorf("cdi spec %s: %w", name, err)
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode cdi spec: %w", err)
	}
	p := filepath.Join(w.Dir, name+".json")
	if err := safefs.WriteFile(p, b, 0o644, safefs.WriteOptions{Durable: true}); err != nil {
		return fmt.Errorf("write cdi spec: %w", err)
	}
	return nil
}

// Remove deletes <Dir>/<name>.json; a missing file is not an error.
func (w Writer) Remove(name string) error {
	if err := os.Remove(filepath.Join(w.Dir, name+".json")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove cdi spec: %w", err)
	}
	return nil
}
