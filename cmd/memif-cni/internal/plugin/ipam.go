package plugin

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/memifnet/memifnet/cmd/internal/cnierr"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/config"
	"github.com/memifnet/memifnet/cmd/memif-cni/internal/failpoint"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

// addIPs gets an ip-mode port's addresses from the delegated IPAM plugin and adds them to its
// port.json and to the result, on the port's interface (index ifIndex in res).
func (a *attachment) addIPs(ctx context.Context, port string, ifIndex int, spec *portspec.PortSpec, res *wired) error {
	ips, err := ipamAdd(ctx, a.conf, a.args, port)
	if err != nil {
		return err
	}
	failpoint.Hit("ipam")
	for _, ip := range ips {
		ip.Interface = current.Int(ifIndex)
		spec.IPs = append(spec.IPs, ip.Address.String())
		res.ips = append(res.ips, ip)
	}
	return nil
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
		return nil, cniErr(cnierr.IPAMNotFound, "field \"ipam.type\": %v", err)
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
