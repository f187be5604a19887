// Package tmpfs is the one vocabulary for the limits of a tmpfs the node agents mount for pods
// (a slot, a link directory): the type every layer passes, from the config files (memif-cni's
// linkLimits, the device plugin's slotLimits and dra.linkLimits) through the slot and link
// providers to the mount itself (safefs.TmpfsOptions), with its file form and its bounds check.
// It imports only the standard library, so that safefs can take it.
package tmpfs

import (
	"fmt"
	"strconv"
	"strings"
)

// Limits bound one tmpfs. In a config file: {"size": "1Mi", "inodes": 64}. A zero field is
// unset (a mount needs both: see Or).
type Limits struct {
	// Size is the most bytes the file system holds (the kernel rounds it up to pages).
	Size Size `json:"size,omitzero"`
	// Inodes is the most files, directories and sockets it holds.
	Inodes int64 `json:"inodes,omitzero"`
}

// Or returns l with each unset (zero) limit taken from d.
func (l Limits) Or(d Limits) Limits {
	if l.Size == 0 {
		l.Size = d.Size
	}
	if l.Inodes == 0 {
		l.Inodes = d.Inodes
	}
	return l
}

// Bounds are the limits a configuration may choose within, both ends included.
type Bounds struct{ Min, Max Limits }

// RangeError is one limit outside its bounds. Field is the limit's key ("size" or "inodes");
// Value, Min and Max are as a config file writes them.
type RangeError struct {
	Key             string // the limits' key in the file, e.g. "slotLimits" ("" for none)
	Field           string
	Value, Min, Max string
}

func (e *RangeError) Error() string {
	return fmt.Sprintf("%s: %s out of range %s..%s", e.Name(), e.Value, e.Min, e.Max)
}

// Name is the limit's full key, e.g. "slotLimits.size".
func (e *RangeError) Name() string {
	if e.Key == "" {
		return e.Field
	}
	return e.Key + "." + e.Field
}

// Check returns a *RangeError for each limit outside b, naming it under key (e.g. "slotLimits",
// so that the error says "slotLimits.size: ..."). The errors are returned as errors, ready for
// errors.Join.
func (l Limits) Check(key string, b Bounds) []error {
	var errs []error
	if l.Size < b.Min.Size || l.Size > b.Max.Size {
		errs = append(errs, &RangeError{Key: key, Field: "size", Value: strconv.Quote(l.Size.String()), Min: b.Min.Size.String(), Max: b.Max.Size.String()})
	}
	if l.Inodes < b.Min.Inodes || l.Inodes > b.Max.Inodes {
		errs = append(errs, &RangeError{Key: key, Field: "inodes", Value: strconv.FormatInt(l.Inodes, 10),
			Min: strconv.FormatInt(b.Min.Inodes, 10), Max: strconv.FormatInt(b.Max.Inodes, 10)})
	}
	return errs
}

// Size is a byte count. A config file writes it as a number with an optional binary suffix
// ("64Ki", "1Mi", "2Gi", "1Ti") or as a plain count, in a JSON string or as a JSON number.
type Size int64

// String writes s with the largest binary suffix that divides it ("64Ki"), else as a count.
func (s Size) String() string {
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"Ti", 40}, {"Gi", 30}, {"Mi", 20}, {"Ki", 10}} {
		if s > 0 && s%(1<<u.shift) == 0 {
			return strconv.FormatInt(int64(s>>u.shift), 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(s), 10)
}

// ParseSize parses "2Mi", "1Gi", "65536". Hand-written rather than a regexp: memif-cni links
// this package, and compiling a regexp at init costs every run of it about 0.5 ms.
func ParseSize(text string) (Size, error) {
	digits, shift := text, uint(0)
	for suffix, sh := range map[string]uint{"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40} {
		if d, ok := strings.CutSuffix(text, suffix); ok {
			digits, shift = d, sh
			break
		}
	}
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, fmt.Errorf("bad quantity %q: want a number with an optional Ki, Mi, Gi or Ti suffix", text)
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad quantity %q: %w", text, err)
	}
	if n > (1<<62)>>shift {
		return 0, fmt.Errorf("bad quantity %q: too large", text)
	}
	return Size(n << shift), nil
}

// UnmarshalJSON accepts a string such as "64Mi" or a plain integer.
func (s *Size) UnmarshalJSON(b []byte) error {
	n, err := ParseSize(strings.Trim(string(b), `"`))
	if err != nil {
		return err
	}
	*s = n
	return nil
}

// MarshalJSON writes the size as String does, in a JSON string.
func (s Size) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(s.String())), nil
}
