package podpolicy

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/memifnet/memifnet/internal/names"
)

func pod(annotation string, limits corev1.ResourceList) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "app", Resources: corev1.ResourceRequirements{Limits: limits}},
			{Name: "side"},
		}},
	}
	if annotation != "" {
		p.Annotations = map[string]string{names.PortsAnnotation: annotation}
	}
	return p
}

// apply applies a JSON patch of "add" operations (all Mutate makes) to a pod, the way the API
// server does (RFC 6902: add on an object member sets it, "-" appends to an array), and decodes
// the result strictly into a Pod.
func apply(t *testing.T, p *corev1.Pod, ops []Op) *corev1.Pod {
	t.Helper()
	b, _ := json.Marshal(p)
	var doc any
	json.Unmarshal(b, &doc)
	patch, _ := json.Marshal(ops) // through JSON, as the API server receives it
	var raw []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	json.Unmarshal(patch, &raw)
	for _, op := range raw {
		if op.Op != "add" {
			t.Fatalf("op %q", op.Op)
		}
		var v any
		if err := json.Unmarshal(op.Value, &v); err != nil {
			t.Fatalf("%s: %v", op.Path, err)
		}
		toks := strings.Split(op.Path, "/")[1:]
		for i := range toks {
			toks[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(toks[i])
		}
		cur := doc
		for _, tok := range toks[:len(toks)-1] {
			switch c := cur.(type) {
			case map[string]any:
				var ok bool
				if cur, ok = c[tok]; !ok {
					t.Fatalf("%s: parent %q missing", op.Path, tok)
				}
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i >= len(c) {
					t.Fatalf("%s: bad index %q", op.Path, tok)
				}
				cur = c[i]
			}
		}
		last := toks[len(toks)-1]
		switch c := cur.(type) {
		case map[string]any:
			c[last] = v
		case []any:
			if last != "-" {
				t.Fatalf("%s: only appends expected", op.Path)
			}
			// Appending needs the parent's reference: redo the walk on the parent map.
			parent := doc
			for _, tok := range toks[:len(toks)-2] {
				switch pc := parent.(type) {
				case map[string]any:
					parent = pc[tok]
				case []any:
					i, _ := strconv.Atoi(tok)
					parent = pc[i]
				}
			}
			parent.(map[string]any)[toks[len(toks)-2]] = append(c, v)
		default:
			t.Fatalf("%s: parent is %T", op.Path, cur)
		}
	}
	b, _ = json.Marshal(doc)
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var out corev1.Pod
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("patched pod does not decode: %v\n%s", err, b)
	}
	return &out
}

func limit(c corev1.Container, rn corev1.ResourceName) string {
	q, ok := c.Resources.Limits[rn]
	if !ok {
		return "unset"
	}
	return q.String()
}

func q(s string) resource.Quantity { return resource.MustParse(s) }

// An annotation-only pod gets its slots, a label per link and a required affinity to each link's
// pods on one node, and no pool unit, zero-copy port or not (a zero-copy pool is the pod's own
// memory); what it had stays.
func TestMutateAnnotationOnly(t *testing.T) {
	p := pod(`[{"name":"east","link":"l1","zeroCopy":true},{"name":"west","link":"l2"},{"name":"up","peer":"host"}]`, nil)
	p.Labels = map[string]string{"app": "x"}
	ops, err := Mutate(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := apply(t, p, ops)
	app := got.Spec.Containers[0]
	if limit(app, names.SocketResource) != "3" || len(app.Resources.Limits) != 1 {
		t.Errorf("limits %v, want 3 sockets and nothing else", app.Resources.Limits)
	}
	if len(app.Resources.Requests) != 0 {
		t.Errorf("requests %v, want none (defaulted from the limits)", app.Resources.Requests)
	}
	if len(got.Spec.Containers[1].Resources.Limits) != 0 {
		t.Errorf("second container got limits %v", got.Spec.Containers[1].Resources.Limits)
	}
	want := map[string]string{"app": "x", "link.memifnet.io/l1": "east", "link.memifnet.io/l2": "west"}
	if len(got.Labels) != len(want) {
		t.Errorf("labels %v, want %v", got.Labels, want)
	}
	for k, v := range want {
		if got.Labels[k] != v {
			t.Errorf("label %s=%q, want %q", k, got.Labels[k], v)
		}
	}
	terms := got.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if len(terms) != 2 {
		t.Fatalf("affinity terms %+v", terms)
	}
	for i, l := range []string{"l1", "l2"} {
		tm := terms[i]
		if tm.TopologyKey != "kubernetes.io/hostname" || len(tm.Namespaces) != 0 || tm.NamespaceSelector != nil ||
			len(tm.LabelSelector.MatchExpressions) != 1 || tm.LabelSelector.MatchExpressions[0].Key != "link.memifnet.io/"+l ||
			tm.LabelSelector.MatchExpressions[0].Operator != metav1.LabelSelectorOpExists {
			t.Errorf("term %d: %+v", i, tm)
		}
		// The pod matches its own term: the scheduler lets the first pod of a link go anywhere.
		if _, ok := got.Labels[tm.LabelSelector.MatchExpressions[0].Key]; !ok {
			t.Errorf("pod does not match its own term %d", i)
		}
	}
	if err := Validate(got); err != nil {
		t.Errorf("the mutated pod does not validate: %v", err)
	}
	// Called again on its own result (reinvocation), it changes nothing but re-setting labels.
	again, err := Mutate(got, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range again {
		if !strings.HasPrefix(op.Path, "/metadata/labels/") {
			t.Errorf("second pass: %+v", op)
		}
	}
	if twice := apply(t, got, again); len(twice.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 2 ||
		limit(twice.Spec.Containers[0], names.SocketResource) != "3" {
		t.Errorf("second pass changed the pod: %+v", twice.Spec)
	}
}

// Existing maps and lists are extended, not replaced: requests get the extended resources too
// (they must equal the limits when set), other affinity terms stay.
func TestMutateKeepsWhatIsThere(t *testing.T) {
	p := pod(`east@l1`, corev1.ResourceList{"cpu": q("1")})
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{"cpu": q("500m")}
	other := corev1.PodAffinityTerm{TopologyKey: "zone", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}
	p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{other}}}
	ops, err := Mutate(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := apply(t, p, ops)
	c := got.Spec.Containers[0]
	if limit(c, "cpu") != "1" || limit(c, names.SocketResource) != "1" {
		t.Errorf("limits %v", c.Resources.Limits)
	}
	if r := c.Resources.Requests[names.SocketResource]; r.String() != "1" || c.Resources.Requests.Cpu().String() != "500m" {
		t.Errorf("requests %v", c.Resources.Requests)
	}
	terms := got.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if len(terms) != 2 || terms[0].TopologyKey != "zone" || terms[1].TopologyKey != HostnameKey {
		t.Errorf("terms %+v", terms)
	}
	if got.Labels["link.memifnet.io/l1"] != "east" {
		t.Errorf("labels %v", got.Labels)
	}
	// Partial affinity structs are filled at the right depth.
	for _, a := range []*corev1.Affinity{{}, {PodAffinity: &corev1.PodAffinity{}}, {NodeAffinity: &corev1.NodeAffinity{}}} {
		p := pod(`east@l1`, nil)
		p.Spec.Affinity = a
		ops, err := Mutate(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := apply(t, p, ops); len(got.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
			t.Errorf("affinity %+v -> %+v", a, got.Spec.Affinity)
		}
	}
}

// Limits that cover the annotation are kept as they are (more slots than ports are allowed, the
// extra ones stay unused); host-only ports get no label or affinity.
func TestMutateKeepsSufficientLimits(t *testing.T) {
	p := pod(`up`, corev1.ResourceList{names.SocketResource: q("2")})
	ops, err := Mutate(p, nil)
	if err != nil || len(ops) != 0 {
		t.Fatalf("ops %+v, %v; want none", ops, err)
	}
	// Limits in another container count.
	p = pod(`[{"name":"a","link":"l","zeroCopy":true}]`, nil)
	p.Spec.Containers[1].Resources.Limits = corev1.ResourceList{names.SocketResource: q("1"), "memifnet.io/bigpool": q("1")}
	ops, err = Mutate(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := apply(t, p, ops); limit(got.Spec.Containers[0], names.SocketResource) != "unset" || len(got.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Errorf("got %+v", got.Spec)
	}
}

// Pool limits are the pod's own: zero-copy ports need none (their pool is a sealed memfd of the
// pod's memory), so whatever the pod asks for, none or zero or more units than ports, is kept
// as it is, and the webhook neither adds one nor refuses the pod for it, in Mutate or Validate.
func TestPoolLimitsUntouched(t *testing.T) {
	zc := `[{"name":"a","link":"l","zeroCopy":true},{"name":"b","peer":"host","zeroCopy":true}]`
	for name, pools := range map[string]corev1.ResourceList{
		"none":              nil,
		"zero":              {"memifnet.io/hugepool": q("0")},
		"one for two ports": {"memifnet.io/hugepool": q("1")},
		"other pools":       {"memifnet.io/bigpool": q("3"), "memifnet.io/hugepool": q("2")},
	} {
		p := pod(zc, pools.DeepCopy())
		ops, err := Mutate(p, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := apply(t, p, ops)
		lim := got.Spec.Containers[0].Resources.Limits
		if limit(got.Spec.Containers[0], names.SocketResource) != "2" || len(lim) != len(pools)+1 {
			t.Errorf("%s: limits %v, want 2 sockets and the pod's pool limits %v", name, lim, pools)
		}
		for rn, want := range pools {
			if have := lim[rn]; have.Cmp(want) != 0 {
				t.Errorf("%s: %s=%s, want the pod's %s", name, rn, have.String(), want.String())
			}
		}
		for _, op := range ops {
			if strings.Contains(op.Path, "pool") {
				t.Errorf("%s: op %+v touches a pool", name, op)
			}
		}
		if err := Validate(got); err != nil {
			t.Errorf("%s: the mutated pod does not validate: %v", name, err)
		}
	}
}

func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		peers  []Peer
		labels map[string]string
		want   string
	}{
		{name: "bad annotation", pod: pod(`[{"name":"a","link":"l","ringSize":1000}]`, nil),
			want: `metadata.annotations[memifnet.io/ports]: port 0 (a): field "ringSize": 1000 must be a power of two`},
		{name: "unknown field", pod: pod(`[{"name":"a","link":"l","colour":1}]`, nil),
			want: `metadata.annotations[memifnet.io/ports]: port 0: unknown field "colour"`},
		{name: "too few sockets", pod: pod(`a@l,b`, corev1.ResourceList{names.SocketResource: q("1")}),
			want: `spec.containers[*].resources.limits[memifnet.io/socket]: 1 in all, but annotation memifnet.io/ports asks for 2 port(s)`},
		{name: "zero sockets", pod: pod(`a@l`, corev1.ResourceList{names.SocketResource: q("0")}),
			want: `limits[memifnet.io/socket]: 0 in all`},
		{name: "too few sockets for zero-copy ports", pod: pod(`[{"name":"a","link":"l","zeroCopy":true},{"name":"b","peer":"host","zeroCopy":true}]`, corev1.ResourceList{names.SocketResource: q("1"), "memifnet.io/hugepool": q("2")}),
			want: `spec.containers[*].resources.limits[memifnet.io/socket]: 1 in all, but annotation memifnet.io/ports asks for 2 port(s)`},
		// A pod never chooses the node's side of its host port (docs/security.md row 32).
		{name: "host port serves", pod: pod(`[{"name":"up","peer":"host","role":"server","zeroCopy":true}]`, nil),
			want: `metadata.annotations[memifnet.io/ports]: port 0 (up): field "role": "server" on a host port: the node's data plane is always the server`},
		{name: "forged link label", pod: pod(`a@mine`, nil), labels: map[string]string{"link.memifnet.io/theirs": "x"},
			want: `metadata.labels[link.memifnet.io/theirs]: names a link that annotation memifnet.io/ports does not`},
		{name: "peers on two nodes", pod: pod(`a@l1,b@l2`, nil),
			peers: []Peer{{Link: "l2", Namespace: "ns", Name: "q", Node: "n2"}, {Link: "l1", Namespace: "ns", Name: "p", Node: "n1"}, {Link: "l1", Namespace: "ns", Name: "unplaced"}},
			want:  `link l1's pod ns/p runs on node n1 and link l2's pod ns/q on node n2`},
		// A drain: the link's pods are evicted together; the replacement of one would be tied to
		// the node the other is leaving.
		{name: "link's only placed pods terminating", pod: pod(`a@l1`, nil),
			peers: []Peer{{Link: "l1", Namespace: "ns", Name: "old-b", Node: "n2", Terminating: true}, {Link: "l1", Namespace: "ns", Name: "old-a", Node: "n2", Terminating: true}},
			want:  `metadata.annotations[memifnet.io/ports]: link l1's pod ns/old-a is terminating on node n2 and no other pod of the link runs`},
		{name: "no containers", pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{names.PortsAnnotation: "a"}}},
			want: `spec.containers: empty`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.labels != nil {
				tc.pod.Labels = tc.labels
			}
			ops, err := Mutate(tc.pod, tc.peers)
			var r *Refusal
			if !errors.As(err, &r) || !strings.Contains(err.Error(), tc.want) || ops != nil {
				t.Errorf("Mutate: %v (ops %+v), want a refusal containing %q", err, ops, tc.want)
			}
		})
	}
}

// Peers of one link on one node, or of other links, are fine.
func TestPeersOnOneNode(t *testing.T) {
	p := pod(`a@l1,b@l2`, nil)
	peers := []Peer{{Link: "l1", Name: "p", Node: "n1"}, {Link: "l2", Name: "q", Node: "n1"}, {Link: "other", Name: "r", Node: "n2"}}
	if _, err := Mutate(p, peers); err != nil {
		t.Fatal(err)
	}
}

// A terminating pod next to a live one of the same link (one end replaced), or an unplaced one
// (nothing ties the new pod to a node), does not refuse the pod.
func TestTerminatingPeerWithLiveOne(t *testing.T) {
	for _, peers := range [][]Peer{
		{{Link: "l1", Name: "old", Node: "n1", Terminating: true}, {Link: "l1", Name: "live", Node: "n1"}},
		{{Link: "l1", Name: "unplaced", Terminating: true}},
		{{Link: "other", Name: "r", Node: "n2", Terminating: true}},
	} {
		if _, err := Mutate(pod(`a@l1`, nil), peers); err != nil {
			t.Errorf("peers %+v: %v", peers, err)
		}
	}
}

func TestNoAnnotationNoPatch(t *testing.T) {
	ops, err := Mutate(pod("", nil), nil)
	if err != nil || ops != nil {
		t.Fatalf("%+v, %v", ops, err)
	}
}

// Validate sees the stored object: a later mutating webhook or a pod sent only for a label does
// not get past it.
func TestValidate(t *testing.T) {
	ok := pod(`a@l`, corev1.ResourceList{names.SocketResource: q("1")})
	ok.Labels = map[string]string{"link.memifnet.io/l": "a"}
	if err := Validate(ok); err != nil {
		t.Fatal(err)
	}
	// A zero-copy port needs no pool unit.
	zc := pod(`[{"name":"a","peer":"host","zeroCopy":true}]`, corev1.ResourceList{names.SocketResource: q("1")})
	if err := Validate(zc); err != nil {
		t.Errorf("zero-copy pod without a pool limit: %v", err)
	}
	noAnn := pod("", nil)
	noAnn.Labels = map[string]string{"link.memifnet.io/l": "a"}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		"label without annotation": {noAnn, "metadata.labels[link.memifnet.io/l]"},
		"limits removed":           {pod(`a@l`, nil), "limits[memifnet.io/socket]: 0 in all"},
		"sockets below the ports":  {pod(`[{"name":"a","peer":"host","zeroCopy":true},{"name":"b","peer":"host"}]`, corev1.ResourceList{names.SocketResource: q("1")}), "limits[memifnet.io/socket]: 1 in all"},
		"bad annotation":           {pod(`A@l`, nil), `field "name"`},
	} {
		if err := Validate(tc.pod); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

func TestValidateUpdate(t *testing.T) {
	old := pod(`a@l`, nil)
	old.Labels = map[string]string{"link.memifnet.io/l": "a", "app": "x"}
	same := old.DeepCopy()
	same.Labels["app"] = "y"
	if err := ValidateUpdate(old, same); err != nil {
		t.Fatal(err)
	}
	ann := old.DeepCopy()
	ann.Annotations[names.PortsAnnotation] = "a@l,b@m"
	relabel := old.DeepCopy()
	delete(relabel.Labels, "link.memifnet.io/l")
	forged := old.DeepCopy()
	forged.Labels["link.memifnet.io/m"] = "a"
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		"annotation changed": {ann, "metadata.annotations[memifnet.io/ports]: cannot change"},
		"label removed":      {relabel, "metadata.labels[link.memifnet.io/l]"},
		"label added":        {forged, "metadata.labels[link.memifnet.io/m]"},
	} {
		if err := ValidateUpdate(old, tc.pod); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}
