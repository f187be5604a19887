//go:build ignore

// Command kube is one binary holding the Kubernetes node and control-plane programs the cluster
// tier runs (kubelet, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl) and etcd.
// Linking once instead of six times saves most of the link time and disk of separate builds.
//
// It is not a package of the memifnet module: it imports k8s.io/kubernetes, whose go.mod holds
// replace directives for its staging modules, so it only builds in the scratch module that
// hack/build-kube.sh makes. The `ignore` build constraint keeps memifnet's own go commands
// (build, vet, mod tidy) away from it; the script drops that line when it copies the file there.
//
// The program to run is chosen by the base name it was started as (hack/build-kube.sh makes a
// symlink per program), or else by the first argument: `kube kubelet --version`. Each program
// starts exactly as its upstream main does.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	_ "time/tzdata" // kube-apiserver and kube-controller-manager: CronJob time zones

	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl: client auth plugins
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

// programs maps each program name to its upstream main. Each runs with os.Args as it would
// see them if it were its own binary.
var programs = map[string]func(){
	"kubelet": func() {
		os.Exit(cli.Run(kubelet.NewKubeletCommand(context.Background())))
	},
	"kube-apiserver": func() {
		os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
	},
	"kube-controller-manager": func() {
		os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
	},
	"kube-scheduler": func() {
		os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
	},
	"kubectl": func() {
		// As upstream: the verbosity is set before the command is built, so that klog works
		// while plugins and .kuberc are handled.
		logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) //nolint:errcheck
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
	},
	"etcd": func() {
		etcdmain.Main(os.Args)
	},
}

func main() {
	name := filepath.Base(os.Args[0])
	if _, ok := programs[name]; !ok && len(os.Args) > 1 {
		// `kube <program> args...`: the program sees itself as argv[0].
		name = os.Args[1]
		os.Args = os.Args[1:]
	}
	run, ok := programs[name]
	if !ok {
		names := make([]string, 0, len(programs))
		for n := range programs {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "usage: kube <program> [args...], or run it through a symlink named after the program\nprograms: %s\n",
			strings.Join(names, ", "))
		os.Exit(2)
	}
	run()
}
