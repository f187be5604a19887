// Package plugin implements memif-cni's CNI verbs. ADD validates everything it can before its
// first side effect, records its plan in the state store, then wires each port; DEL undoes the
// plan step by step and tolerates every step being already undone, so a crash anywhere in ADD is
// cleaned up by the runtime's DEL.
//
// The verbs are in add.go, del.go and check.go (CHECK, STATUS, GC); the wiring of one port in
// wire.go, with its delegated IPAM in ipam.go and a host port's description in hostport.go.
package plugin

import (
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/memifnet/memifnet/cmd/internal/cnierr"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/config"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/state"
)

// cniErr is an error of the catalogue (cmd/internal/cnierr) with its details.
func cniErr(k cnierr.Kind, format string, a ...any) *types.Error { return config.Err(k, format, a...) }

func timeout(c *config.NetConf) time.Duration { return time.Duration(c.TimeoutSeconds) * time.Second }

// env is what a verb runs with: the network config, the runtime's arguments and the state store.
type env struct {
	conf *config.NetConf
	args *skel.CmdArgs
	st   state.Store
}

func newEnv(conf *config.NetConf, args *skel.CmdArgs) env {
	return env{conf: conf, args: args, st: store(conf)}
}

// attachment is one attachment's record as a verb works on it. ADD fills the record in as it
// wires each port and saves it after every step, so that an undo knows what to reverse.
type attachment struct {
	env
	rec state.Attachment
}

func (e env) attachment(rec state.Attachment) *attachment { return &attachment{env: e, rec: rec} }

// key names the attachment in the state store.
func (a *attachment) key() string { return state.Key(a.rec.ContainerID, a.rec.IfName) }

// save writes the record as it now stands.
func (a *attachment) save() error { return a.st.WriteAttachment(a.rec) }
