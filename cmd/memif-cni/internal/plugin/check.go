package plugin

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/memifnet/memifnet/cmd/internal/cnierr"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/config"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/state"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// Check verifies that what ADD made is still there.
func Check(args *skel.CmdArgs) error {
	conf, err := config.Parse(args.StdinData, true)
	if err != nil {
		return err
	}
	e := newEnv(conf, args)
	att, ok, err := e.st.ReadAttachment(state.Key(args.ContainerID, args.IfName))
	if err != nil {
		return cniErr(cnierr.State, "%v", err)
	}
	if !ok {
		return nil // a pod without memif ports
	}
	a := e.attachment(att)
	var problems []string
	for _, p := range att.Ports {
		if err := a.checkPort(p); err != nil {
			problems = append(problems, fmt.Sprintf("port %s: %v", p.Name, err))
		}
	}
	if len(problems) > 0 {
		return cniErr(cnierr.CheckFailed, "%s", strings.Join(problems, "; "))
	}
	return nil
}

func (a *attachment) checkPort(p state.Port) error {
	if claim, ok, err := a.st.ClaimOf(p.Slot); err != nil || !ok || claim.Owner != a.key() {
		return fmt.Errorf("slot %s is no longer claimed by this attachment (%+v, %v)", p.Slot, claim, err)
	}
	slot, err := openSlot(a.conf, p.Slot)
	if err != nil {
		return err
	}
	defer slot.Close()
	if id, err := slot.Identity(); err != nil || id != p.SlotMount {
		return fmt.Errorf("slot %s was replaced since ADD (%v)", p.Slot, err)
	}
	b, err := slot.ReadFile(names.PortFile, maxPortFile)
	if err != nil {
		return err
	}
	spec, err := portspec.Parse(b)
	if err != nil {
		return fmt.Errorf("%s in slot %s: %w", names.PortFile, p.Slot, err)
	}
	if spec.Name != p.Name || spec.Role != p.Role {
		return fmt.Errorf("%s in slot %s describes port %s (%s)", names.PortFile, p.Slot, spec.Name, spec.Role)
	}
	if _, err := os.Stat(p.DevInfo); err != nil {
		return fmt.Errorf("device-info: %w", err)
	}
	if p.Link == "" {
		return nil
	}
	return a.checkLink(slot, p)
}

// checkLink verifies that the link is still mounted in the slot and the port still a member.
func (a *attachment) checkLink(slot *safefs.Dir, p state.Port) error {
	if id, mounted, err := slot.MountAt(names.LinkSubdir); err != nil || !mounted || !id.SameFile(p.LinkMount) {
		return fmt.Errorf("%s in slot %s is not the link mount ADD made (%v)", names.LinkSubdir, p.Slot, err)
	}
	ln, ok, err := a.st.ReadLink(a.rec.Namespace, p.Link)
	member := false
	for _, m := range ln.Members {
		member = member || m.Key == a.key()
	}
	if err != nil || !ok || !member {
		return fmt.Errorf("not a member of link %s (%v)", p.Link, err)
	}
	return linkDirs(a.conf).Check(a.rec.Namespace, p.Link, ln.Mount)
}

// Status reports whether the node agent's directories and the kubelet's PodResources socket are
// there: without them no ADD can succeed.
func Status(args *skel.CmdArgs) error {
	conf, err := config.Parse(args.StdinData, true)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(conf.SlotsDir()); err != nil || !fi.IsDir() {
		return cniErr(cnierr.NotReady, "slot directory %s is missing: is memif-deviceplugin running with stateDir %s?", conf.SlotsDir(), conf.StateDir)
	}
	if err := os.MkdirAll(conf.StoreDir(), 0o755); err != nil {
		return cniErr(cnierr.NotReady, "state directory: %v", err)
	}
	if fi, err := os.Stat(conf.PodResourcesSocket()); err != nil || fi.Mode().Type() != os.ModeSocket {
		return cniErr(cnierr.NotReady, "kubelet PodResources socket %s is missing", conf.PodResourcesSocket())
	}
	return nil
}

// GC deletes every attachment of this network that the runtime no longer knows.
func GC(args *skel.CmdArgs) error {
	conf, err := config.Parse(args.StdinData, true)
	if err != nil {
		return err
	}
	valid := map[string]bool{}
	for _, a := range append(conf.ValidAttachments, conf.Attachments...) {
		valid[state.Key(a.ContainerID, a.IfName)] = true
	}
	e := newEnv(conf, args)
	keys, err := e.st.Attachments()
	if err != nil {
		return cniErr(cnierr.GC, "%v", err)
	}
	var errs []error
	for _, k := range keys {
		if valid[k] {
			continue
		}
		// Only this network's attachments: a GC for one network (a Multus NetworkAttachment-
		// Definition, say) lists only its own valid attachments.
		if att, ok, err := e.st.ReadAttachment(k); err != nil || !ok || att.Network != conf.Name {
			continue
		}
		if err := e.del(k); err != nil {
			errs = append(errs, fmt.Errorf("attachment %s: %w", k, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return cniErr(cnierr.GC, "%v", err)
	}
	return nil
}
