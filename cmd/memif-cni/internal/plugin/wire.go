package plugin

import (
	"context"
	"errors"
	"path/filepath"

	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/memifnet/memifnet/cmd/internal/cnierr"
	"github.com/memifnet/memifnet/cmd/internal/devinfo"
	"github.com/memifnet/memifnet/cmd/internal/slotwire"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/failpoint"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/state"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/ports"
	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// wire performs the side effects of each port, filling in the record as it learns roles.
func (a *attachment) wire(ctx context.Context, reqs []ports.Port) (*wired, error) {
	res := &wired{}
	for i, r := range reqs {
		if err := a.wirePort(ctx, i, r, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// wirePort wires port i. Everything it does inside the pod's slot goes through the slot's open
// directory (internal/safefs), under the slot's lock, after claiming the slot for this attachment.
func (a *attachment) wirePort(ctx context.Context, i int, r ports.Port, res *wired) error {
	p := &a.rec.Ports[i]
	slk, err := a.st.LockSlot(p.Slot)
	if err != nil {
		return err
	}
	defer slk.Unlock()
	slot, err := a.claimSlot(p)
	if err != nil {
		return err
	}
	defer slot.Close()

	spec := r.Spec(ports.PodOwner(a.rec.Namespace, a.rec.Pod))
	if r.Link != "" {
		if err := a.joinLink(slot, i, r, &spec); err != nil {
			return err
		}
	} else {
		hostEnd(p.Slot, &spec)
	}
	p.Role = spec.Role
	if err := a.save(); err != nil {
		return err
	}

	ifIndex := len(res.ifaces)
	res.ifaces = append(res.ifaces, &current.Interface{Name: r.Name, Mac: spec.MAC, Sandbox: a.args.Netns, SocketPath: spec.Socket})
	if p.IPAM {
		if err := a.addIPs(ctx, r.Name, ifIndex, &spec, res); err != nil {
			return err
		}
	}
	return a.publish(slot, i, spec)
}

// claimSlot opens the port's slot, records the slot's tmpfs and claims the slot before the first
// write into it, so that an undo, whenever it runs, knows what it may touch.
func (a *attachment) claimSlot(p *state.Port) (*safefs.Dir, error) {
	slot, err := openSlot(a.conf, p.Slot)
	if err != nil {
		return nil, cniErr(cnierr.SlotDirMissing, "slot %s of pod %s/%s: %v (is memif-deviceplugin running with the same stateDir?)", p.Slot, a.rec.Namespace, a.rec.Pod, err)
	}
	if p.SlotMount, err = slot.Identity(); err == nil {
		if err = a.save(); err == nil {
			err = a.st.Claim(p.Slot, state.SlotClaim{Owner: a.key(), Network: a.rec.Network, Mount: p.SlotMount})
		}
	}
	if err != nil {
		slot.Close()
		return nil, err
	}
	return slot, nil
}

// joinLink joins port i's link, which picks the port's role and holds the link's secret, and
// mounts the link's directory on <slot>/link, where the server's socket is.
func (a *attachment) joinLink(slot *safefs.Dir, i int, r ports.Port, spec *portspec.PortSpec) error {
	p := &a.rec.Ports[i]
	if err := mountsReachPod(slot); err != nil {
		return cniErr(cnierr.MountsStayHere, "slot %s of pod %s/%s: %v", p.Slot, a.rec.Namespace, a.rec.Pod, err)
	}
	dirs := linkDirs(a.conf)
	ln, role, err := a.st.Join(a.rec.Namespace, r.Link, dirs, state.JoinRequest{
		Key: a.key(), Pod: a.rec.Pod, Port: r.Name, Role: r.Role, ID: r.ID, Mode: r.Mode,
	})
	var ce *state.ConflictError
	if errors.As(err, &ce) {
		return cniErr(cnierr.LinkConflict, "pod %s/%s port %d (%s): %v", a.rec.Namespace, a.rec.Pod, i, r.Name, err)
	}
	if err != nil {
		return err
	}
	spec.Role, spec.Secret = role, ln.Secret
	failpoint.Hit("join")
	p.LinkMount = ln.Mount
	if err := a.save(); err != nil {
		return err
	}
	if err := bindLink(slot, dirs, ln); err != nil {
		return refusal(err, "cannot mount link %q in slot %s of pod %s/%s", r.Link, p.Slot, a.rec.Namespace, a.rec.Pod)
	}
	failpoint.Hit("mount")
	spec.Socket = containerSlot(p.Slot) + "/" + names.LinkSubdir + "/" + names.SocketFile
	return nil
}

// containerSlot is the slot's directory as the container sees it.
func containerSlot(slot string) string { return names.ContainerDir + "/" + slot }

// publish tells the pod, the runtime and the host about port i, once it is wired: port.json in
// the slot, the device-info files, and a host port's description.
func (a *attachment) publish(slot *safefs.Dir, i int, spec portspec.PortSpec) error {
	p := a.rec.Ports[i]
	if err := writePortSpec(slot, spec); err != nil {
		return refusal(err, "cannot write %s in slot %s of pod %s/%s", names.PortFile, p.Slot, a.rec.Namespace, a.rec.Pod)
	}
	failpoint.Hit("portjson")
	info := devinfo.Info{Type: "memif", Version: devinfo.Version,
		Memif: &devinfo.Memif{Role: devinfo.SpecRole(spec.Role), Path: spec.Socket, Mode: devinfo.SpecMode(spec.Mode)}}
	if err := devinfo.Write(p.DevInfo, info); err != nil {
		return err
	}
	if err := a.publishRuntimeDevInfo(i, info); err != nil {
		return err
	}
	failpoint.Hit("devinfo")
	if p.HostDesc != "" {
		if err := writeHostDesc(p.HostDesc, filepath.Join(a.conf.SlotsDir(), p.Slot, names.SocketFile), &a.rec, spec); err != nil {
			return err
		}
		failpoint.Hit("hostdesc")
	}
	return nil
}

// publishRuntimeDevInfo fills the runtime's CNIDeviceInfoFile, which holds one device: Multus
// copies it into the network-status entry of every interface the attachment returns. With one
// port it describes that port; with several it is removed (whatever Multus copied there from
// the device plugin included), so that no port's entry shows another port's socket: each port's
// own file (devinfo.CNIPath) describes it.
func (a *attachment) publishRuntimeDevInfo(i int, info devinfo.Info) error {
	switch {
	case a.rec.DeviceInfoFile == "" || i > 0:
		return nil
	case len(a.rec.Ports) == 1:
		return devinfo.Write(a.rec.DeviceInfoFile, info)
	default:
		return devinfo.Remove(a.rec.DeviceInfoFile)
	}
}

// writePortSpec writes port.json into the pod's slot (cmd/internal/slotwire).
func writePortSpec(slot *safefs.Dir, spec portspec.PortSpec) error {
	return slotwire.WritePortSpec(slot, spec)
}
