package cli

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/memifnet/memifnet/cmd/kubectl-memifnet/internal/agentmetrics"
	"github.com/memifnet/memifnet/cmd/kubectl-memifnet/internal/linkview"
)

func link() linkview.Link {
	return linkview.Link{Namespace: "ns", Name: "l", Backend: linkview.BackendDevicePlugin, Node: "n1", Status: linkview.StatusWired,
		Ends: []linkview.End{{Pod: "rx", Port: "east", Role: "server", Wired: true}, {Pod: "tx", Port: "west", Wired: true}}}
}

func TestApplyMetrics(t *testing.T) {
	rx, tx := agentmetrics.Key{Namespace: "ns", Pod: "rx", Port: "east"}, agentmetrics.Key{Namespace: "ns", Pod: "tx", Port: "west"}
	a := agentmetrics.Snapshot{At: time.Unix(0, 0), Ports: map[agentmetrics.Key]agentmetrics.Counters{
		rx: {HasUp: true, Up: true, RxPackets: 1000}, tx: {HasUp: true, Up: true, TxPackets: 1000}}}
	b := agentmetrics.Snapshot{At: time.Unix(2, 0), Ports: map[agentmetrics.Key]agentmetrics.Counters{
		rx: {HasUp: true, Up: true, RxPackets: 3001000, Drops: 2}, tx: {HasUp: true, Up: true, TxPackets: 3001000}}}
	l := link()
	ApplyMetrics(&l, a, &b)
	if l.State != "up" || l.Ends[0].Stats == nil || *l.Ends[0].Stats.RxPPS != 1.5e6 || l.Ends[0].Stats.Drops != 2 {
		t.Fatalf("%+v %+v", l, l.Ends[0].Stats)
	}
	// rx is end A: B->A (tx to rx) is what rx receives per second.
	if got := pps(l.Ends[1], l.Ends[0]); got != "1.50M" {
		t.Errorf("pps tx->rx %q", got)
	}
	if got := pps(l.Ends[0], l.Ends[1]); got != "0" {
		t.Errorf("pps rx->tx %q", got)
	}
	down := a
	down.Ports = map[agentmetrics.Key]agentmetrics.Counters{rx: {HasUp: true, Up: true}, tx: {HasUp: true}}
	l = link()
	ApplyMetrics(&l, down, nil)
	if l.State != "down" {
		t.Errorf("one end down: state %q", l.State)
	}
	l = link()
	ApplyMetrics(&l, agentmetrics.Snapshot{Ports: map[agentmetrics.Key]agentmetrics.Counters{rx: {HasUp: true, Up: true}}}, nil)
	if l.State != "" || l.StateUnknownReason == "" {
		t.Errorf("one end unreported: state %q reason %q", l.State, l.StateUnknownReason)
	}
}

func TestPrintLinks(t *testing.T) {
	var out bytes.Buffer
	e := &env{opts: opts{allNamespaces: true}, out: &out, errw: &out}
	host := linkview.Link{Namespace: "ns", Host: true, Backend: linkview.BackendDRA, Claim: "c", Status: linkview.StatusPending,
		Ends: []linkview.End{{Pod: "hp", Port: "vswitch", Role: "client"}, {Role: "server"}}}
	if err := printLinks(e, []linkview.Link{link(), host}); err != nil {
		t.Fatal(err)
	}
	want := `NAMESPACE   LINK          BACKEND         END-A        END-B     NODE   ROLES           STATUS    STATE   PPS-AB   PPS-BA   DROPS
ns          l             device-plugin   rx/east      tx/west   n1     server/-        Wired     -       -        -        -
ns          <host-port>   dra             hp/vswitch   host      -      client/server   Pending   -       -        -        -
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

func TestMainRefusesBadUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"bogus"}, {"explain"}, {"links", "extra"}, {"links", "-o", "name"}, {"links", "-o", "bogus"}, {"links", "-o", "go-template={{.}}"}, {"links", "-o", "jsonpath"}, {"links", "--no-such-flag"}} {
		var out, errb bytes.Buffer
		if code := Main(args, &out, &errb); code != 2 || out.Len() != 0 || errb.Len() == 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := Main([]string{"--help"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "kubectl memifnet [command]") || !strings.Contains(out.String(), "explain") {
		t.Errorf("--help: %d %q", code, out.String())
	}
}

// Every flag the plugin took before it moved to cobra and cli-runtime (clientcmd's override
// flags, kubectl's) still parses, with the same shorthand (--server gained kubectl's -s).
func TestOldFlagsStillParse(t *testing.T) {
	old := pflag.NewFlagSet("old", pflag.ContinueOnError)
	old.String("kubeconfig", "", "")
	clientcmd.BindOverrideFlags(&clientcmd.ConfigOverrides{}, old, clientcmd.RecommendedConfigOverrideFlags(""))
	old.BoolP("all-namespaces", "A", false, "")
	old.StringP("output", "o", "", "")
	old.String("agent-namespace", "", "")
	old.Duration("rate-interval", 0, "")
	old.Duration("timeout", 0, "")
	root := newRoot(io.Discard, io.Discard)
	fs := root.PersistentFlags()
	old.VisitAll(func(f *pflag.Flag) {
		n := fs.Lookup(f.Name)
		if n == nil {
			t.Errorf("--%s is gone", f.Name)
		} else if f.Shorthand != "" && n.Shorthand != f.Shorthand {
			t.Errorf("--%s: shorthand %q, was %q", f.Name, n.Shorthand, f.Shorthand)
		}
	})
}

// -o json, yaml, jsonpath and wide: the report through kubectl's printers, as it is (no kind or
// apiVersion is added), and the wide table's extra columns.
func TestOutputFormats(t *testing.T) {
	host := linkview.Link{Namespace: "ns", Host: true, Backend: linkview.BackendDRA, Claim: "c", Status: linkview.StatusPending,
		Ends: []linkview.End{{Pod: "hp", Port: "vswitch", Role: "client", Phase: "Pending"}, {Role: "server"}}}
	report := struct {
		Links []linkview.Link `json:"links"`
	}{[]linkview.Link{link(), host}}
	for format, want := range map[string]string{
		"json":                                 "{\n    \"links\": [\n        {\n            \"namespace\": \"ns\",",
		"yaml":                                 "links:\n- backend: device-plugin\n",
		"jsonpath={.links[*].link}":            "l ",
		"jsonpath-as-json={.links[*].backend}": "[\n    \"device-plugin\",\n    \"dra\"\n]",
	} {
		var o opts
		p, err := outputPrinter(format, "", &o)
		if err != nil {
			t.Fatalf("-o %s: %v", format, err)
		}
		var out bytes.Buffer
		e := &env{printer: p, out: &out}
		if err := e.print(report); err != nil {
			t.Fatalf("-o %s: %v", format, err)
		}
		if !strings.HasPrefix(out.String(), want) || strings.Contains(out.String(), "apiVersion") {
			t.Errorf("-o %s:\n%s\nwant it to begin %q", format, out.String(), want)
		}
	}
	var out bytes.Buffer
	e := &env{opts: opts{wide: true}, out: &out, errw: &out}
	if err := printLinks(e, []linkview.Link{link(), host}); err != nil {
		t.Fatal(err)
	}
	want := `LINK          BACKEND         END-A        END-B     NODE   ROLES           STATUS    STATE   PPS-AB   PPS-BA   DROPS   PHASES      CLAIM
l             device-plugin   rx/east      tx/west   n1     server/-        Wired     -       -        -        -       -/-         -
<host-port>   dra             hp/vswitch   host      -      client/server   Pending   -       -        -        -       Pending/-   c
`
	if out.String() != want {
		t.Errorf("-o wide: got\n%s\nwant\n%s", out.String(), want)
	}
}

// TestCleanHostileText: what a hostile pod can put in front of the operator (a symlink target in
// memif-cni's refusal, an annotation) reaches the terminal escaped, never as a control sequence.
func TestCleanHostileText(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, ünïcode":                     "plain text, ünïcode",
		"it is a symlink (to \"\x1b]0;pwned\a\")": `it is a symlink (to "\x1b]0;pwned\x07")`,
		"tab\tnewline\n":                          `tab\x09newline\x0a`,
		"rtl \u202egnp.exe":                       `rtl \u202egnp.exe`,
		"bad utf8 \xff":                           `bad utf8 \ufffd`,
		"c1 \u009b31m":                            `c1 \u009b31m`,
	} {
		if got := clean(in); got != want {
			t.Errorf("clean(%q) = %q, want %q", in, got, want)
		}
	}
	var out bytes.Buffer
	e := &env{out: &out, errw: &out}
	ev := "memif-cni: refused a planted file; refusing link: it is a symlink (to \"\x1b[2J\")"
	e.note("%s", ev)
	tb := newTable(&out)
	tb.row("a\x1b[31m", "b")
	_ = tb.flush()
	if strings.ContainsRune(out.String(), 0x1b) {
		t.Errorf("an escape reached the output: %q", out.String())
	}
}

// TestPortsHostilePhase (security row 40): status.phase is free text to whoever may write
// pods/status. `kubectl memifnet ports` of a pod whose phase holds escape sequences, a newline
// (a forged second line) and a bidi override prints it escaped, on its one line; explain too
// shows nothing raw.
func TestPortsHostilePhase(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Annotations: map[string]string{"memifnet.io/ports": "east@l"}},
		Status: corev1.PodStatus{Phase: "Running\x1b]0;pwned\a\x1b[2J\nPod ns/other (Running, node n1)\u202e"}}
	run := func(cmd func(context.Context, *env, []string) error) string {
		var out, errw bytes.Buffer
		e := &env{cs: fake.NewClientset(pod), namespace: "ns", out: &out, errw: &errw}
		if err := cmd(context.Background(), e, []string{"p"}); err != nil {
			t.Fatal(err)
		}
		got := out.String() + errw.String()
		if strings.ContainsAny(got, "\x1b\a\u202e") {
			t.Errorf("the phase reached the terminal raw:\n%q", got)
		}
		return out.String()
	}
	first, _, _ := strings.Cut(run(runPorts), "\n")
	if want := `Pod ns/p (Running\x1b]0;pwned\x07\x1b[2J\x0aPod ns/other (Running, node n1)\u202e, node -)`; first != want {
		t.Errorf("ports: first line\n%s\nwant\n%s", first, want)
	}
	run(runExplain)
}
