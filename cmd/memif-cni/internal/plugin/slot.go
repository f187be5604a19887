package plugin

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/memifnet/memifnet/cmd/internal/cnierr"
	"github.com/memifnet/memifnet/cmd/internal/linkdir"
	"github.com/memifnet/memifnet/cmd/internal/slotwire"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/config"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/state"
	"github.com/memifnet/memifnet/internal/safefs"
)

// maxPortFile bounds what CHECK reads back from a slot: a pod may have put anything there.
const maxPortFile = 64 << 10

// store is the plugin's state store for conf.
func store(conf *config.NetConf) state.Store {
	return state.Store{Dir: conf.StoreDir(), Boot: bootID()}
}

// bootID identifies this boot of the node; "" if the kernel does not say.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func linkDirs(conf *config.NetConf) linkdir.Dirs {
	return linkdir.Dirs{Root: conf.LinksDir(), Limits: conf.LinkLimits.Limits}
}

// openSlot opens the tmpfs memif-deviceplugin mounted for slot.
func openSlot(conf *config.NetConf, slot string) (*safefs.Dir, error) {
	return slotwire.OpenSlot(conf.SlotsDir(), slot)
}

// bindLink mounts the link's directory on <slot>/link (cmd/internal/slotwire).
func bindLink(slot *safefs.Dir, dirs linkdir.Dirs, ln state.Link) error {
	return slotwire.BindLink(slot, dirs, ln.Namespace, ln.Name, ln.Mount)
}

// refusal turns a refused path into a CNI error that says what was refused; other errors pass.
func refusal(err error, format string, a ...any) error {
	if errors.Is(err, safefs.ErrRefused) {
		return cniErr(cnierr.Refused, "%s: %v", fmt.Sprintf(format, a...), err)
	}
	return err
}
