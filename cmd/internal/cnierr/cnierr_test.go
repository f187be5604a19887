package cnierr

import (
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

// The spec's codes are libcni's numbers; every Kind has a hint, and no message has two codes.
func TestCatalogue(t *testing.T) {
	for got, want := range map[uint]uint{CodeInvalidEnv: types.ErrInvalidEnvironmentVariables, CodeIO: types.ErrIOFailure,
		CodeInvalidConfig: types.ErrInvalidNetworkConfig, CodeTryAgainLater: types.ErrTryAgainLater,
		CodeInternal: types.ErrInternal} {
		if got != want {
			t.Errorf("code %d, libcni's is %d", got, want)
		}
	}
	seen := map[string]bool{}
	for _, k := range All {
		if seen[k.Msg] {
			t.Errorf("message %q twice", k.Msg)
		}
		seen[k.Msg] = true
		if Hint(k.Code) == "" {
			t.Errorf("%q: code %d has no hint", k.Msg, k.Code)
		}
		if got, ok := ByMsg(k.Msg); !ok || got != k {
			t.Errorf("ByMsg(%q) = %v, %v", k.Msg, got, ok)
		}
	}
	if len(All) != 20 || All[0] != InvalidConfig || All[19] != CheckFailed {
		t.Errorf("All: %v", All)
	}
}
