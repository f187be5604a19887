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

// mountsReachPod refuses a slot whose mount, as memif-cni sees it, is a slave that is not
// shared: memif-cni then runs in a mount namespace of its own that receives the node's mounts
// but sends none back (the Multus thick daemon's, whose view of the host is HostToContainer), and
// the link it would mount on <slot>/link would stay there: ADD would succeed and the pod's port
// never come up. A shared slot mount (the node agent's Bidirectional state dir, seen from the
// node or from a daemon that mounts it Bidirectional too) or a private one (memif-cni in the
// namespace where the slot was mounted) is fine.
func mountsReachPod(slot *safefs.Dir) error {
	m, err := slot.Mount()
	if err != nil {
		return err
	}
	if m.Propagation() != "slave" {
		return nil
	}
	return fmt.Errorf("its mount here (%s, %s) is a slave mount that is not shared: a link mounted "+
		"on it would stay in memif-cni's mount namespace and never reach the pod. memif-cni runs inside "+
		"another program's mount namespace (the Multus thick daemon's?): mount the memifnet state dir "+
		"into it with mountPropagation: Bidirectional (docs/install.md, \"Multus thick\")", m.Point, strings.Join(m.Optional, " "))
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
