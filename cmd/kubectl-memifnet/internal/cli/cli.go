// Package cli is kubectl-memifnet's commands: the command line (cobra, with kubectl's own
// flags and printers from cli-runtime, as kubectl plugins do), what each command reads from the
// API server (tolerating what the user may not read), and the output, as tables like kubectl get
// or through kubectl's printers (-o json|yaml|jsonpath=...|go-template=...).
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/kubernetes"

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

// opts is the parsed command line.
type opts struct {
	allNamespaces bool
	wide          bool
	agentNS       string
	proxyURL      string
	username      string
	password      string
	rateInterval  time.Duration
	timeout       time.Duration
}

// env is what a command runs with.
type env struct {
	opts
	cs        kubernetes.Interface
	namespace string
	metrics   agentmetrics.Source
	printer   printers.ResourcePrinter // nil: a table (-o wide: with more columns)
	out, errw io.Writer
}

// usageError is a bad command line (exit code 2); cobra's own errors (unknown command or flag,
// wrong argument count) are usage errors too, everything a command returns is not.
type usageError struct{ error }

// runError is what a command returned (exit code 1).
type runError struct{ error }

// Main runs the plugin with the arguments after the program name and returns the exit code: 0,
// 1 (an error, on stderr), 2 (usage).
func Main(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	var re runError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &re):
		fmt.Fprintln(stderr, "error: "+clean(re.Error()))
		return 1
	}
	fmt.Fprintln(stderr, "error: "+clean(err.Error()))
	fmt.Fprintln(stderr, "See 'kubectl memifnet --help' for usage.")
	return 2
}

var commands = []struct {
	use, short string
	run        func(context.Context, *env, []string) error
}{
	{"links", "every link of the namespace (-A: of all namespaces)", runLinks},
	{"ports POD", "the pod's memif ports", runPorts},
	{"node NODE", "the node's socket slots and pools, used and free", runNode},
	{"explain POD", "why the pod's link is not up", runExplain},
}

// newRoot is the command tree. Every flag is the root's (persistent), so that flags go before or
// after the command as they always did (`kubectl memifnet -n ns explain p`, `links -A`).
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	cf := genericclioptions.NewConfigFlags(true)
	var o opts
	var output, template string
	root := &cobra.Command{
		Use:   "kubectl-memifnet",
		Short: "memif links, ports and slots of a cluster running memifnet",
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl memifnet",
		},
		SilenceErrors: true, SilenceUsage: true,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return usageError{errors.New("a command is required")} },
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	fs := root.PersistentFlags()
	cf.AddFlags(fs)
	fs.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "links: every namespace")
	fs.StringVarP(&output, "output", "o", "", "output format: wide, json, yaml, jsonpath=..., jsonpath-file=..., jsonpath-as-json=... (default: a table)")
	fs.StringVar(&template, "template", "", "the JSONPath (-o jsonpath) or its file (-o jsonpath-file)")
	// Not ConfigFlags' password flags: with them its loader prompts on stdin, and a plugin in
	// a script must not wait for a user. clientcmd's flags had them; kept, never prompting.
	fs.StringVar(&o.username, "username", "", "username for basic authentication to the API server")
	fs.StringVar(&o.password, "password", "", "password for basic authentication to the API server")
	// kubectl has no --proxy-url (the kubeconfig's proxy-url is read); clientcmd's flags had it.
	fs.StringVar(&o.proxyURL, "proxy-url", "", "URL of the proxy to the API server (default: the kubeconfig's)")
	fs.StringVar(&o.agentNS, "agent-namespace", AgentNamespace, "namespace of the memifnet node agent (its metrics)")
	fs.DurationVar(&o.rateInterval, "rate-interval", time.Second, "links: time between the two metric scrapes rates are computed from (0: counters only)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "give up after this long")
	for _, c := range commands {
		nargs := len(strings.Fields(c.use)) - 1
		root.AddCommand(&cobra.Command{
			Use: c.use, Short: c.short, Args: cobra.ExactArgs(nargs),
			RunE: func(cmd *cobra.Command, args []string) error {
				printer, err := outputPrinter(output, template, &o)
				if err != nil {
					return err
				}
				e, err := newEnv(cf, o, printer, stdout, stderr)
				if err != nil {
					return runError{err}
				}
				ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
				defer cancel()
				if err := c.run(ctx, e, args); err != nil {
					return runError{err}
				}
				return nil
			},
		})
	}
	return root
}

// outputPrinter is -o's printer: nil for a table (wide sets o.wide), kubectl's JSON, YAML and
// JSONPath printers for the rest. Not go-template: text/template looks methods up by name, which
// keeps every exported method of every type in the binary (41.7 -> 71.2 MB).
func outputPrinter(format, template string, o *opts) (printers.ResourcePrinter, error) {
	switch format {
	case "", "wide":
		o.wide = format == "wide"
		return nil, nil
	}
	p, err := genericclioptions.NewJSONYamlPrintFlags().ToPrinter(format)
	if genericclioptions.IsNoCompatiblePrinterError(err) {
		p, err = genericclioptions.NewJSONPathPrintFlags(template, true).ToPrinter(format)
	}
	if err != nil {
		return nil, usageError{fmt.Errorf("--output %q: %w", format, err)}
	}
	return p, nil
}

func newEnv(cf *genericclioptions.ConfigFlags, o opts, p printers.ResourcePrinter, stdout, stderr io.Writer) (*env, error) {
	ns, _, err := cf.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	rc, err := cf.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	rc.UserAgent = "kubectl-memifnet"
	if o.username != "" || o.password != "" {
		rc.Username, rc.Password = o.username, o.password
	}
	if o.proxyURL != "" {
		u, err := url.Parse(o.proxyURL)
		if err != nil {
			return nil, fmt.Errorf("--proxy-url: %w", err)
		}
		rc.Proxy = http.ProxyURL(u)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &env{opts: o, cs: cs, namespace: ns, printer: p, out: stdout, errw: stderr,
		metrics: agentmetrics.PortForward{Client: cs, Config: rc, Namespace: o.agentNS, Selector: AgentSelector}}, nil
}

// print hands a command's report to -o's printer. The reports are not API objects (no kind or
// apiVersion): they go as JSON in a runtime.Unknown, which kubectl's printers take as it is.
func (e *env) print(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return e.printer.PrintObj(&runtime.Unknown{Raw: b, ContentType: runtime.ContentTypeJSON}, e.out)
}

// note tells the user on stderr what could not be read, so stdout stays the table.
func (e *env) note(format string, a ...any) {
	fmt.Fprintln(e.errw, "note: "+clean(strings.TrimSuffix(fmt.Sprintf(format, a...), "\n")))
}
