package names

import (
	"errors"
	"fmt"
	"strings"
)

// PodIndexLabel is the label the StatefulSet controller sets on each pod with its ordinal.
const PodIndexLabel = "apps.kubernetes.io/pod-index"

// OrdinalPlaceholder in a link name is replaced by the pod's StatefulSet ordinal, so that
// replica i of one StatefulSet links with replica i of another.
const OrdinalPlaceholder = "{ordinal}"

// maxOrdinalDigits bounds the ordinal label: StatefulSet replicas are an int32.
const maxOrdinalDigits = 10

// HasPlaceholder reports whether link uses any brace, i.e. needs ResolveLink before use.
func HasPlaceholder(link string) bool { return strings.ContainsAny(link, "{}") }

// ResolveLink replaces every {ordinal} in link by the pod's ordinal (the value of PodIndexLabel,
// ok=false when the pod has no such label). It is the one resolver the webhook and memif-cni
// share, so both pair pods identically. Any other brace use ({index}, an unclosed "{") is refused
// rather than kept literally, since a brace can never be part of a valid link name. The ordinal
// must be a plain decimal ("0", "12"; no sign, space or leading zero), so two spellings of one
// number cannot name two links. The result must be a valid link name.
func ResolveLink(link, ordinal string, ok bool) (string, error) {
	if !HasPlaceholder(link) {
		return link, nil
	}
	rest := strings.ReplaceAll(link, OrdinalPlaceholder, "")
	if strings.ContainsAny(rest, "{}") {
		return "", fmt.Errorf("link %q: the only placeholder is %s; any other brace is refused", link, OrdinalPlaceholder)
	}
	if !ok {
		return "", fmt.Errorf("link %q uses %s but the pod has no label %s (only StatefulSet pods have it)", link, OrdinalPlaceholder, PodIndexLabel)
	}
	if err := checkOrdinal(ordinal); err != nil {
		return "", fmt.Errorf("link %q: label %s=%q: %w", link, PodIndexLabel, ordinal, err)
	}
	out := strings.ReplaceAll(link, OrdinalPlaceholder, ordinal)
	if len(out) > MaxLinkNameLen || !IsDNSLabel(out) {
		return "", fmt.Errorf("link %q resolves to %q, not 1-%d characters of [a-z0-9-] starting and ending alphanumeric", link, out, MaxLinkNameLen)
	}
	return out, nil
}

func checkOrdinal(s string) error {
	if s == "" || len(s) > maxOrdinalDigits {
		return errors.New("not a plain non-negative decimal of 1-10 digits")
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return errors.New("not a plain non-negative decimal")
		}
	}
	if len(s) > 1 && s[0] == '0' {
		return errors.New("leading zero: not the controller's spelling of an ordinal")
	}
	return nil
}
