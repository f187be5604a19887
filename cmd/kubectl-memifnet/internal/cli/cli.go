// Package cli is kubectl-memifnet's commands: flags (kubectl's own, through client-go's
// clientcmd), what each command reads from the API server (tolerating what the user may not
// read), and the output, as tables like kubectl get or as JSON.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/memifnet/memifnet/cmd/kubectl-memifnet/internal/agentmetrics"
)

// Where the node agent runs (manifests/base/daemonset.yaml).
const (
	AgentNamespace = "memifnet-system"
	AgentSelector  = "app.kubernetes.io/name=memifnet-node"
)

// agentSelector is AgentSelector parsed.
var agentSelector = func() labels.Selector {
	s, err := labels.Parse(AgentSelector)
	if err != nil {
		panic(err)
	}
	return s
}()

const usage = `kubectl memifnet: memif links, ports and slots of a cluster running memifnet.

Usage:
  kubectl memifnet links [-A] [-o json]   every link of the namespace (-A: of all namespaces)
  kubectl memifnet ports POD [-o json]    the pod's memif ports
  kubectl memifnet node NODE [-o json]    the node's socket slots and pools, used and free
  kubectl memifnet explain POD [-o json]  why the pod's link is not up

Flags:
`

// opts is the parsed command line.
type opts struct {
	allNamespaces bool
	output        string
	agentNS       string
	rateInterval  time.Duration
	timeout       time.Duration
}

// env is what a command runs with.
type env struct {
	opts
	cs        kubernetes.Interface
	namespace string
	metrics   agentmetrics.Source
	out, errw io.Writer
}

// Main runs the plugin with the arguments after the program name and returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("kubectl-memifnet", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var o opts
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	fs.StringVar(&rules.ExplicitPath, "kubeconfig", "", "path to the kubeconfig file")
	overrides := &clientcmd.ConfigOverrides{}
	clientcmd.BindOverrideFlags(overrides, fs, clientcmd.RecommendedConfigOverrideFlags(""))
	fs.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "links: every namespace")
	fs.StringVarP(&o.output, "output", "o", "", "output format: json (default: a table)")
	fs.StringVar(&o.agentNS, "agent-namespace", AgentNamespace, "namespace of the memifnet node agent (its metrics)")
	fs.DurationVar(&o.rateInterval, "rate-interval", time.Second, "links: time between the two metric scrapes rates are computed from (0: counters only)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "give up after this long")
	fs.Usage = func() { fmt.Fprint(stderr, usage+fs.FlagUsages()) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	if o.output != "" && o.output != "json" {
		fmt.Fprintf(stderr, "error: --output %q: only json is supported\n", o.output)
		return 2
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return 2
	}
	cmd, rest := rest[0], rest[1:]
	run, nargs, ok := command(cmd)
	if !ok {
		fmt.Fprintf(stderr, "error: unknown command %q\n", cmd)
		fs.Usage()
		return 2
	}
	if len(rest) != nargs {
		fmt.Fprintf(stderr, "error: %s takes %d argument(s), got %q\n", cmd, nargs, rest)
		return 2
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	e, err := newEnv(cc, o, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	if err := run(ctx, e, rest); err != nil {
		fmt.Fprintln(stderr, "error: "+clean(err.Error()))
		return 1
	}
	return 0
}

func command(name string) (func(context.Context, *env, []string) error, int, bool) {
	switch name {
	case "links":
		return runLinks, 0, true
	case "ports":
		return runPorts, 1, true
	case "node":
		return runNode, 1, true
	case "explain":
		return runExplain, 1, true
	}
	return nil, 0, false
}

func newEnv(cc clientcmd.ClientConfig, o opts, stdout, stderr io.Writer) (*env, error) {
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	rc.UserAgent = "kubectl-memifnet"
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &env{opts: o, cs: cs, namespace: ns, out: stdout, errw: stderr,
		metrics: agentmetrics.PortForward{Client: cs, Config: rc, Namespace: o.agentNS, Selector: AgentSelector}}, nil
}

// note tells the user on stderr what could not be read, so stdout stays the table.
func (e *env) note(format string, a ...any) {
	fmt.Fprintln(e.errw, "note: "+clean(strings.TrimSuffix(fmt.Sprintf(format, a...), "\n")))
}
