package plugin

import (
	"context"
	"crypto/sha256"
	"errors"
	"net"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/memifnet/memifnet/cmd/internal/devinfo"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/config"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/failpoint"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/state"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/ports"
	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/internal/slotwire"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// wire performs the side effects of each port, updating att as it learns roles.
func wire(ctx context.Context, conf *config.NetConf, args *skel.CmdArgs, st state.Store, att *state.Attachment, reqs []ports.Port) (*wired, error) {
	res := &wired{}
	for i, r := range reqs {
		if err := wirePort(ctx, conf, args, st, att, i, r, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// wirePort wires port i. Everything it does inside the pod's slot goes through the slot's open
// directory (internal/safefs), under the slot's lock, after claiming the slot for this attachment.
func wirePort(ctx context.Context, conf *config.NetConf, args *skel.CmdArgs, st state.Store, att *state.Attachment, i int, r ports.Port, res *wired) error {
	p := &att.Ports[i]
	key := state.Key(att.ContainerID, att.IfName)
	slk, err := st.LockSlot(p.Slot)
	if err != nil {
		return err
	}
	defer slk.Unlock()
	slot, err := openSlot(conf, p.Slot)
	if err != nil {
		return cniErr(types.ErrIOFailure, "slot directory missing", "slot %s of pod %s/%s: %v (is memif-deviceplugin running with the same stateDir?)", p.Slot, att.Namespace, att.Pod, err)
	}
	defer slot.Close()
	if p.SlotMount, err = slot.Identity(); err != nil {
		return err
	}
	// Record the slot's tmpfs and claim it before the first write into it, so that an undo,
	// whenever it runs, knows what it may touch.
	if err := st.WriteAttachment(*att); err != nil {
		return err
	}
	if err := st.Claim(p.Slot, state.SlotClaim{Owner: key, Network: att.Network, Mount: p.SlotMount}); err != nil {
		return err
	}

	spec := portspec.PortSpec{
		Version: portspec.Version, Name: r.Name, Mode: r.Mode, ID: r.ID, Queues: r.Queues,
		RingSize: r.RingSize, BufferSize: r.BufferSize, ZeroCopy: r.ZeroCopy, Link: r.Link, Peer: r.Peer,
	}
	if r.Mode == "ethernet" {
		spec.MAC = stableMAC(att.Namespace, att.Pod, r.Name).String()
	}
	containerSlot := names.ContainerDir + "/" + p.Slot
	if r.Link != "" {
		dirs := linkDirs(conf)
		ln, role, err := st.Join(att.Namespace, r.Link, dirs, state.JoinRequest{
			Key: key, Pod: att.Pod, Port: r.Name, Role: r.Role, ID: r.ID, Mode: r.Mode,
		})
		var ce *state.ConflictError
		if errors.As(err, &ce) {
			return cniErr(ErrLinkConflict, "link conflict", "pod %s/%s port %d (%s): %v", att.Namespace, att.Pod, i, r.Name, err)
		}
		if err != nil {
			return err
		}
		spec.Role, spec.Secret = role, ln.Secret
		failpoint.Hit("join")
		p.LinkMount = ln.Mount
		if err := st.WriteAttachment(*att); err != nil {
			return err
		}
		if err := bindLink(slot, dirs, ln); err != nil {
			return refusal(err, "cannot mount link %q in slot %s of pod %s/%s", r.Link, p.Slot, att.Namespace, att.Pod)
		}
		failpoint.Hit("mount")
		spec.Socket = containerSlot + "/" + names.LinkSubdir + "/" + names.SocketFile
	} else {
		// A host data plane listens on the slot's socket by default: the pod is the client.
		spec.Role = r.Role
		if spec.Role == "" {
			spec.Role = "client"
		}
		spec.Socket = containerSlot + "/" + names.SocketFile
	}
	p.Role = spec.Role
	if err := st.WriteAttachment(*att); err != nil {
		return err
	}

	ifIndex := len(res.ifaces)
	res.ifaces = append(res.ifaces, &current.Interface{Name: r.Name, Mac: spec.MAC, Sandbox: args.Netns, SocketPath: spec.Socket})
	if p.IPAM {
		ips, err := ipamAdd(ctx, conf, args, r.Name)
		if err != nil {
			return err
		}
		failpoint.Hit("ipam")
		for _, ip := range ips {
			ip.Interface = current.Int(ifIndex)
			spec.IPs = append(spec.IPs, ip.Address.String())
			res.ips = append(res.ips, ip)
		}
	}
	if err := writePortSpec(slot, spec); err != nil {
		return refusal(err, "cannot write %s in slot %s of pod %s/%s", names.PortFile, p.Slot, att.Namespace, att.Pod)
	}
	failpoint.Hit("portjson")
	info := devinfo.Info{Type: "memif", Version: devinfo.Version,
		Memif: &devinfo.Memif{Role: devinfo.SpecRole(spec.Role), Path: spec.Socket, Mode: devinfo.SpecMode(spec.Mode)}}
	if err := devinfo.Write(p.DevInfo, info); err != nil {
		return err
	}
	if i == 0 && att.DeviceInfoFile != "" {
		if err := devinfo.Write(att.DeviceInfoFile, info); err != nil {
			return err
		}
	}
	failpoint.Hit("devinfo")
	if p.HostDesc != "" {
		if err := writeHostDesc(p.HostDesc, filepath.Join(conf.SlotsDir(), p.Slot, names.SocketFile), att, spec); err != nil {
			return err
		}
		failpoint.Hit("hostdesc")
	}
	return nil
}

// writePortSpec writes port.json into the pod's slot (internal/slotwire).
func writePortSpec(slot *safefs.Dir, spec portspec.PortSpec) error {
	return slotwire.WritePortSpec(slot, spec)
}

// stableMAC derives a locally administered unicast MAC from the pod's name and the port, so the
// port keeps its MAC when the pod's sandbox is re-created.
func stableMAC(ns, pod, port string) net.HardwareAddr {
	sum := sha256.Sum256([]byte(ns + "/" + pod + "/" + port))
	mac := net.HardwareAddr(sum[:6])
	mac[0] = mac[0]&^0x01 | 0x02
	return mac
}
