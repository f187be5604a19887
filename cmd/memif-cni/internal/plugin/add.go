package plugin

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/memifnet/memifnet/cmd/internal/cnierr"
	"github.com/memifnet/memifnet/cmd/internal/devinfo"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/config"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/failpoint"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/podlookup"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/podresources"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/state"
	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/ports"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

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
	reqs, slots, err := podPorts(ctx, conf, k8s, ann)
	if err != nil {
		return err
	}

	a := newEnv(conf, args).attachment(plan(conf, args, k8s, reqs, slots))
	lk, err := a.st.LockAttachment(a.key())
	if err != nil {
		return cniErr(cnierr.State, "%v", err)
	}
	if err := a.record(); err != nil {
		lk.Unlock()
		return err
	}
	res, err := a.wire(ctx, reqs)
	if err != nil {
		return a.abort(lk, err)
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
		return "", cniErr(cnierr.NoAnnotations, "%v", err)
	}
	return anns[names.PortsAnnotation], nil
}

// podPorts parses and validates the pod's ports and asks the kubelet for its slots, one for each
// port: everything ADD can check before its first side effect.
func podPorts(ctx context.Context, conf *config.NetConf, k8s config.K8sArgs, ann string) ([]ports.Port, []string, error) {
	reqs, err := ports.Parse(ann)
	if err != nil {
		return nil, nil, config.Error("pod %s/%s: %v", k8s.Namespace, k8s.Name, err)
	}
	if k8s.Namespace == "" || k8s.Name == "" {
		return nil, nil, cniErr(cnierr.MissingPod, "CNI_ARGS lacks K8S_POD_NAMESPACE or K8S_POD_NAME; memif ports need a Kubernetes pod")
	}
	if !names.IsDNSLabel(k8s.Namespace) {
		return nil, nil, cniErr(cnierr.InvalidNamespace, "K8S_POD_NAMESPACE %q is not a DNS label", k8s.Namespace)
	}
	slots, err := podresources.Slots(ctx, conf.PodResourcesSocket(), k8s.Namespace, k8s.Name)
	if err != nil {
		return nil, nil, cniErr(cnierr.NoSlotLookup, "%v", err)
	}
	for _, s := range slots {
		if !names.IsDNSLabel(s) {
			return nil, nil, cniErr(cnierr.InvalidSlotID, "the kubelet reports %s %q, which is not a slot name of memif-deviceplugin", names.SocketResource, s)
		}
	}
	if len(slots) < len(reqs) {
		return nil, nil, cniErr(cnierr.NoSlots,
			"pod %s/%s asks for %d memif ports but holds %d %s; set resources.limits[%q] to %d in one of its containers",
			k8s.Namespace, k8s.Name, len(reqs), len(slots), names.SocketResource, names.SocketResource, len(reqs))
	}
	return reqs, slots, nil
}

// plan is the record of what ADD is about to do: the i-th port in the i-th slot, and the files
// it will write.
func plan(conf *config.NetConf, args *skel.CmdArgs, k8s config.K8sArgs, reqs []ports.Port, slots []string) state.Attachment {
	att := state.Attachment{Network: conf.Name, ContainerID: args.ContainerID, IfName: args.IfName, Namespace: k8s.Namespace, Pod: k8s.Name,
		PodUID: k8s.UID, DeviceInfoFile: conf.RuntimeConfig.DeviceInfoFile}
	for i, r := range reqs {
		att.Ports = append(att.Ports, state.Port{
			Name: r.Name, Slot: slots[i], Link: r.Link, Mode: r.Mode,
			IPAM:    r.Mode == "ip" && conf.IPAMType != "",
			DevInfo: devinfo.CNIPath(conf.DeviceInfoDir, args.ContainerID, args.IfName, r.Name),
		})
		if r.Peer == portspec.PeerHost {
			att.Ports[i].HostDesc = filepath.Join(conf.StoreDir(), names.HostPortsSubdir, slots[i]+".json")
		}
	}
	return att
}

// record saves the plan before the first side effect, under the attachment's lock. A repeated
// ADD starts from a clean slate: what an earlier ADD of the same attachment did is undone first.
func (a *attachment) record() error {
	if old, ok, _ := a.st.ReadAttachment(a.key()); ok {
		if err := a.attachment(old).undo(); err != nil {
			return cniErr(cnierr.UndoEarlierAdd, "%v", err)
		}
	}
	if err := a.save(); err != nil {
		return cniErr(cnierr.State, "%v", err)
	}
	failpoint.Hit("record")
	return nil
}

// abort undoes a failed ADD at once rather than wait for DEL: a pod that cannot start should not
// hold a link end another pod is waiting for. If undoing fails, the record stays for DEL to
// retry. It returns err as a CNI error and releases lk.
func (a *attachment) abort(lk *state.Lock, err error) error {
	if uerr := a.undo(); uerr != nil {
		err = fmt.Errorf("%w (and undoing: %v)", err, uerr)
		lk.Unlock()
	} else {
		_ = a.st.RemoveAttachment(a.key(), lk)
	}
	var ce *types.Error
	if errors.As(err, &ce) {
		return ce
	}
	return cniErr(cnierr.AddFailed, "%v", err)
}

// wired is what ADD adds to the result: one interface per port, and the ip-mode ports' addresses.
type wired struct {
	ifaces []*current.Interface
	ips    []*current.IPConfig
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
