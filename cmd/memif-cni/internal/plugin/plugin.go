// Package plugin implements memif-cni's CNI verbs. ADD validates everything it can before its
// first side effect, records its plan in the state store, then wires each port; DEL undoes the
// plan step by step and tolerates every step being already undone, so a crash anywhere in ADD is
// cleaned up by the runtime's DEL.
package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/memifnet/memifnet/cmd/internal/devinfo"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/config"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/failpoint"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/podlookup"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/podresources"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/state"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/peerconf"
	"github.com/memifnet/memifnet/internal/ports"
	"github.com/memifnet/memifnet/internal/safefs"
	"github.com/memifnet/memifnet/internal/slotwire"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
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

// Add wires the pod's ports.
func Add(args *skel.CmdArgs) error {
	conf, err := config.Parse(args.StdinData, true)
	if err != nil {
		return err
	}
	k8s, err := config.ParseArgs(args.Args)
	if err != nil {
		return err
	}
	prev, err := prevResult(conf)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout(conf))
	defer cancel()
	ann, err := annotation(ctx, conf, k8s)
	if err != nil {
		return err
	}
	if ann == "" {
		// Not a memif pod: pass the primary plugin's result through untouched.
		return printResult(conf, prev, nil)
	}
	reqs, err := ports.Parse(ann)
	if err != nil {
		return config.Error("pod %s/%s: %v", k8s.Namespace, k8s.Name, err)
	}
	if k8s.Namespace == "" || k8s.Name == "" {
		return cniErr(types.ErrInvalidEnvironmentVariables, "missing pod identity", "CNI_ARGS lacks K8S_POD_NAMESPACE or K8S_POD_NAME; memif ports need a Kubernetes pod")
	}
	if !isDNSLabel(k8s.Namespace) {
		return cniErr(types.ErrInvalidEnvironmentVariables, "invalid pod namespace", "K8S_POD_NAMESPACE %q is not a DNS label", k8s.Namespace)
	}
	slots, err := podresources.Slots(ctx, conf.PodResourcesSocket(), k8s.Namespace, k8s.Name)
	if err != nil {
		return cniErr(types.ErrTryAgainLater, "cannot ask the kubelet for the pod's slots", "%v", err)
	}
	for _, s := range slots {
		if !isDNSLabel(s) {
			return cniErr(types.ErrIOFailure, "invalid slot ID", "the kubelet reports %s %q, which is not a slot name of memif-deviceplugin", names.SocketResource, s)
		}
	}
	if len(slots) < len(reqs) {
		return cniErr(ErrNoSlots, "not enough memif socket slots",
			"pod %s/%s asks for %d memif ports but holds %d %s; set resources.limits[%q] to %d in one of its containers",
			k8s.Namespace, k8s.Name, len(reqs), len(slots), names.SocketResource, names.SocketResource, len(reqs))
	}

	st := store(conf)
	key := state.Key(args.ContainerID, args.IfName)
	lk, err := st.LockAttachment(key)
	if err != nil {
		return cniErr(types.ErrIOFailure, "state", "%v", err)
	}
	// A repeated ADD starts from a clean slate.
	if old, ok, _ := st.ReadAttachment(key); ok {
		if err := undo(conf, args, st, old); err != nil {
			lk.Unlock()
			return cniErr(types.ErrIOFailure, "undo earlier ADD", "%v", err)
		}
	}
	att := state.Attachment{Network: conf.Name, ContainerID: args.ContainerID, IfName: args.IfName, Namespace: k8s.Namespace, Pod: k8s.Name,
		PodUID: k8s.UID, DeviceInfoFile: conf.RuntimeConfig.DeviceInfoFile}
	for i, r := range reqs {
		att.Ports = append(att.Ports, state.Port{
			Name: r.Name, Slot: slots[i], Link: r.Link, Mode: r.Mode,
			IPAM:    r.Mode == "ip" && conf.IPAMType != "",
			DevInfo: devinfo.CNIPath(conf.DeviceInfoDir, args.ContainerID, args.IfName, r.Name),
		})
		if r.Peer == portspec.PeerHost {
			att.Ports[i].HostDesc = filepath.Join(conf.StoreDir(), "host-ports", slots[i]+".json")
		}
	}
	if err := st.WriteAttachment(att); err != nil {
		lk.Unlock()
		return cniErr(types.ErrIOFailure, "state", "%v", err)
	}
	failpoint.Hit("record")

	res, err := wire(ctx, conf, args, st, &att, reqs)
	if err != nil {
		// Undo at once rather than wait for DEL: a pod that cannot start should not hold a link
		// end another pod is waiting for. If undoing fails, the record stays for DEL to retry.
		if uerr := undo(conf, args, st, att); uerr != nil {
			err = fmt.Errorf("%w (and undoing: %v)", err, uerr)
			lk.Unlock()
		} else {
			_ = st.RemoveAttachment(key, lk)
		}
		var ce *types.Error
		if errors.As(err, &ce) {
			return ce
		}
		return cniErr(types.ErrInternal, "ADD failed", "%v", err)
	}
	lk.Unlock()
	failpoint.Hit("done")
	return printResult(conf, prev, res)
}

// annotation returns the pod's ports annotation ("" when it has none).
func annotation(ctx context.Context, conf *config.NetConf, k8s config.K8sArgs) (string, error) {
	if conf.RuntimeConfig.PodAnnotations == nil && k8s.Name == "" {
		return "", nil // not started by a Kubernetes runtime: no pod, no ports
	}
	anns, _, err := podlookup.Annotations(ctx, podlookup.Pod{Namespace: k8s.Namespace, Name: k8s.Name, UID: k8s.UID}, podlookup.Options{
		RuntimeAnnotations: conf.RuntimeConfig.PodAnnotations,
		KubeletURL:         conf.KubeletURL,
		Kubeconfig:         conf.Kubeconfig,
		Timeout:            timeout(conf),
	})
	if err != nil {
		return "", cniErr(types.ErrTryAgainLater, "cannot read the pod's annotations", "%v", err)
	}
	return anns[ports.Annotation], nil
}

type wired struct {
	ifaces []*current.Interface
	ips    []*current.IPConfig
}

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

// HostPort is the description of a host port for a host data plane (VPP, DPDK): the socket as
// the host sees it and the host's side of the connection.
type HostPort struct {
	Socket     string `json:"socket"`
	Role       string `json:"role"` // the host's memif role
	ID         uint32 `json:"id"`
	Mode       string `json:"mode"`
	Secret     string `json:"secret,omitempty"`
	Queues     int    `json:"queues"`
	RingSize   int    `json:"ringSize"`
	BufferSize int    `json:"bufferSize"`
	Namespace  string `json:"namespace"`
	Pod        string `json:"pod"`
	Port       string `json:"port"`
}

func writeHostDesc(file, hostSocket string, att *state.Attachment, spec portspec.PortSpec) error {
	role := "server"
	if spec.Role == "server" {
		role = "client"
	}
	b, err := json.MarshalIndent(HostPort{Socket: hostSocket, Role: role, ID: spec.ID, Mode: spec.Mode, Secret: spec.Secret,
		Queues: spec.Queues, RingSize: spec.RingSize, BufferSize: spec.BufferSize, Namespace: att.Namespace, Pod: att.Pod, Port: spec.Name}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", file, err)
	}
	// Under the state directory, which no pod can reach.
	if err := safefs.WriteFile(file, append(b, '\n'), 0o600, safefs.WriteOptions{}); err != nil {
		return err
	}
	// The host side's DPDK, VPP and libmemif configs beside it (<slot>.dpdk.args, ...).
	return peerconf.WriteHost(file, peerconf.HostSide(spec, hostSocket, strings.TrimSuffix(filepath.Base(file), ".json"), att.Namespace+"/"+att.Pod))
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

func ipamArgs(args *skel.CmdArgs, command, ifName string) *invoke.Args {
	return &invoke.Args{Command: command, ContainerID: args.ContainerID, NetNS: args.Netns, IfName: ifName,
		PluginArgsStr: args.Args, Path: args.Path}
}

// ipamAdd runs the delegated IPAM plugin with the port name as interface name, so that several
// ip-mode ports of one attachment hold separate addresses.
func ipamAdd(ctx context.Context, conf *config.NetConf, args *skel.CmdArgs, port string) ([]*current.IPConfig, error) {
	path, err := invoke.FindInPath(conf.IPAMType, filepath.SplitList(args.Path))
	if err != nil {
		return nil, cniErr(types.ErrInvalidNetworkConfig, "IPAM plugin not found", "field \"ipam.type\": %v", err)
	}
	r, err := invoke.ExecPluginWithResult(ctx, path, args.StdinData, ipamArgs(args, "ADD", port), nil)
	if err != nil {
		return nil, fmt.Errorf("IPAM %s for port %s: %w", conf.IPAMType, port, err)
	}
	res, err := current.NewResultFromResult(r)
	if err != nil {
		return nil, fmt.Errorf("IPAM %s result: %w", conf.IPAMType, err)
	}
	return res.IPs, nil
}

func ipamDel(conf *config.NetConf, args *skel.CmdArgs, port string) error {
	if conf.IPAMType == "" {
		return nil
	}
	path, err := invoke.FindInPath(conf.IPAMType, filepath.SplitList(args.Path))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout(conf))
	defer cancel()
	return invoke.ExecPluginWithoutResult(ctx, path, args.StdinData, ipamArgs(args, "DEL", port), nil)
}

func prevResult(conf *config.NetConf) (*current.Result, error) {
	if len(conf.RawPrevResult) == 0 || string(conf.RawPrevResult) == "null" {
		return nil, nil
	}
	r, err := version.NewResult(conf.CNIVersion, conf.RawPrevResult)
	if err != nil {
		return nil, config.Error("field \"prevResult\": %v", err)
	}
	res, err := current.NewResultFromResult(r)
	if err != nil {
		return nil, config.Error("field \"prevResult\": %v", err)
	}
	return res, nil
}

func printResult(conf *config.NetConf, prev *current.Result, w *wired) error {
	res := prev
	if res == nil {
		res = &current.Result{CNIVersion: current.ImplementedSpecVersion}
	}
	if w != nil {
		base := len(res.Interfaces)
		for _, ip := range w.ips {
			ip.Interface = current.Int(*ip.Interface + base)
		}
		res.Interfaces = append(res.Interfaces, w.ifaces...)
		res.IPs = append(res.IPs, w.ips...)
	}
	return types.PrintResult(res, conf.CNIVersion)
}

// Del undoes ADD. It never needs the pod, the kubelet or the netns: everything comes from the
// attachment record, and a missing record means there is nothing to undo.
func Del(args *skel.CmdArgs) error {
	conf, err := config.Parse(args.StdinData, false)
	if err != nil {
		return err
	}
	st := store(conf)
	if err := delAttachment(conf, args, st, state.Key(args.ContainerID, args.IfName)); err != nil {
		return cniErr(types.ErrIOFailure, "DEL failed", "%v", err)
	}
	return nil
}

func delAttachment(conf *config.NetConf, args *skel.CmdArgs, st state.Store, key string) error {
	lk, err := st.LockAttachment(key)
	if err != nil {
		return err
	}
	att, ok, err := st.ReadAttachment(key)
	if err != nil || !ok {
		if err == nil {
			return st.RemoveAttachment(key, lk) // nothing planned: drop the lock file too
		}
		lk.Unlock()
		return err
	}
	if err := undo(conf, args, st, att); err != nil {
		lk.Unlock()
		return err
	}
	return st.RemoveAttachment(key, lk)
}

// undo reverses every step of att's plan, newest first; each step tolerates being undone.
func undo(conf *config.NetConf, args *skel.CmdArgs, st state.Store, att state.Attachment) error {
	var errs []error
	key := state.Key(att.ContainerID, att.IfName)
	if att.DeviceInfoFile != "" {
		errs = append(errs, devinfo.Remove(att.DeviceInfoFile))
	}
	for i := len(att.Ports) - 1; i >= 0; i-- {
		p := att.Ports[i]
		if p.HostDesc != "" {
			errs = append(errs, removeFile(p.HostDesc), peerconf.RemoveHost(p.HostDesc))
		}
		errs = append(errs, devinfo.Remove(p.DevInfo))
		errs = append(errs, unwireSlot(conf, st, key, p))
		if p.IPAM {
			dargs := *args
			dargs.ContainerID = att.ContainerID
			if err := ipamDel(conf, &dargs, p.Name); err != nil {
				errs = append(errs, fmt.Errorf("IPAM DEL for port %s: %w", p.Name, err))
			}
		}
		if p.Link != "" {
			errs = append(errs, st.Leave(att.Namespace, p.Link, linkDirs(conf), key))
		}
	}
	return errors.Join(errs...)
}

// unwireSlot takes port.json and the link mount out of the port's slot, but only while the slot
// is still this attachment's: claimed by it, with the tmpfs it wrote into. A slot handed to
// another pod since, or wired by a newer sandbox of the same pod, is left alone. What the pod
// put in its slot is not ours to judge: anything that is not what ADD made is left in place and
// reported on stderr, and the slot's next scrub replaces it all.
func unwireSlot(conf *config.NetConf, st state.Store, key string, p state.Port) error {
	if p.SlotMount.IsZero() {
		return nil // ADD stopped before touching the slot
	}
	slk, err := st.LockSlot(p.Slot)
	if err != nil {
		return err
	}
	claim, ok, err := st.ClaimOf(p.Slot)
	if err != nil || ok && claim.Owner != key {
		slk.Unlock()
		return err
	}
	if slot, err := openSlot(conf, p.Slot); err == nil {
		if id, err := slot.Identity(); err == nil && id == p.SlotMount {
			unwireLink(slot, p)
			if err := slotwire.RemovePortSpec(slot); err != nil {
				warn("slot %s: leaving %s: %v", p.Slot, names.PortFile, err)
			}
		}
		slot.Close()
	}
	// Otherwise the slot is gone or another tmpfs now: nothing of ours is in it.
	return st.Release(p.Slot, key, slk)
}

// unwireLink unmounts the link directory from <slot>/link if a bind of the port's link is there
// (ADD may have died between the bind and its record of it) and removes the directory; what is
// not ours is left and reported.
func unwireLink(slot *safefs.Dir, p state.Port) {
	if err := slotwire.UnbindLink(slot, p.LinkMount); err != nil {
		warn("slot %s: link %s: %v", p.Slot, p.Link, err)
	}
}

func removeFile(f string) error {
	if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// warn reports something DEL leaves alone; the runtime logs a plugin's stderr.
func warn(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "memif-cni: "+format+"\n", a...)
}

// Check verifies that what ADD made is still there.
func Check(args *skel.CmdArgs) error {
	conf, err := config.Parse(args.StdinData, true)
	if err != nil {
		return err
	}
	st := store(conf)
	key := state.Key(args.ContainerID, args.IfName)
	att, ok, err := st.ReadAttachment(key)
	if err != nil {
		return cniErr(types.ErrIOFailure, "state", "%v", err)
	}
	if !ok {
		return nil // a pod without memif ports
	}
	var problems []string
	for _, p := range att.Ports {
		if err := checkPort(conf, st, att, p); err != nil {
			problems = append(problems, fmt.Sprintf("port %s: %v", p.Name, err))
		}
	}
	if len(problems) > 0 {
		return cniErr(types.ErrInternal, "CHECK failed", "%s", strings.Join(problems, "; "))
	}
	return nil
}

func checkPort(conf *config.NetConf, st state.Store, att state.Attachment, p state.Port) error {
	key := state.Key(att.ContainerID, att.IfName)
	if claim, ok, err := st.ClaimOf(p.Slot); err != nil || !ok || claim.Owner != key {
		return fmt.Errorf("slot %s is no longer claimed by this attachment (%+v, %v)", p.Slot, claim, err)
	}
	slot, err := openSlot(conf, p.Slot)
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
	if id, mounted, err := slot.MountAt(names.LinkSubdir); err != nil || !mounted || !id.SameFile(p.LinkMount) {
		return fmt.Errorf("%s in slot %s is not the link mount ADD made (%v)", names.LinkSubdir, p.Slot, err)
	}
	ln, ok, err := st.ReadLink(att.Namespace, p.Link)
	member := false
	for _, m := range ln.Members {
		member = member || m.Key == key
	}
	if err != nil || !ok || !member {
		return fmt.Errorf("not a member of link %s (%v)", p.Link, err)
	}
	return linkDirs(conf).Check(att.Namespace, p.Link, ln.Mount)
}

// Status reports whether the node agent's directories and the kubelet's PodResources socket are
// there: without them no ADD can succeed.
func Status(args *skel.CmdArgs) error {
	conf, err := config.Parse(args.StdinData, true)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(conf.SlotsDir()); err != nil || !fi.IsDir() {
		return cniErr(ErrPluginNotAvailable, "not ready", "slot directory %s is missing: is memif-deviceplugin running with stateDir %s?", conf.SlotsDir(), conf.StateDir)
	}
	if err := os.MkdirAll(conf.StoreDir(), 0o755); err != nil {
		return cniErr(ErrPluginNotAvailable, "not ready", "state directory: %v", err)
	}
	if fi, err := os.Stat(conf.PodResourcesSocket()); err != nil || fi.Mode().Type() != os.ModeSocket {
		return cniErr(ErrPluginNotAvailable, "not ready", "kubelet PodResources socket %s is missing", conf.PodResourcesSocket())
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
	st := store(conf)
	keys, err := st.Attachments()
	if err != nil {
		return cniErr(types.ErrIOFailure, "GC", "%v", err)
	}
	var errs []error
	for _, k := range keys {
		if valid[k] {
			continue
		}
		// Only this network's attachments: a GC for one network (a Multus NetworkAttachment-
		// Definition, say) lists only its own valid attachments.
		if att, ok, err := st.ReadAttachment(k); err != nil || !ok || att.Network != conf.Name {
			continue
		}
		if err := delAttachment(conf, args, st, k); err != nil {
			errs = append(errs, fmt.Errorf("attachment %s: %w", k, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return cniErr(types.ErrIOFailure, "GC", "%v", err)
	}
	return nil
}
