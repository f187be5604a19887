// Package plugin implements memif-cni's CNI verbs. ADD validates everything it can before its
// first side effect, records its plan in the state store, then wires each port; DEL undoes the
// plan step by step and tolerates every step being already undone, so a crash anywhere in ADD is
// cleaned up by the runtime's DEL.
package plugin

import (
	"fmt"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/memifnet/memifnet/cmd/memif-cni/internal/config"
)

// Error codes of this plugin (CNI reserves 1-99 for the spec; 100+ are the plugin's own).
const (
	ErrNoSlots            uint = 101 // the pod holds fewer memifnet.io/socket slots than it asks ports
	ErrLinkConflict       uint = 102 // the link is full, or the other end disagrees on role, id or mode
	ErrPluginNotAvailable uint = 50
)

func cniErr(code uint, msg string, format string, a ...any) *types.Error {
	return types.NewError(code, "memif-cni: "+msg, fmt.Sprintf(format, a...))
}

func timeout(c *config.NetConf) time.Duration { return time.Duration(c.TimeoutSeconds) * time.Second }
