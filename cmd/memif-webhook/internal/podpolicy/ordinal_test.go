package podpolicy

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/memifnet/memifnet/internal/names"
	"github.com/memifnet/memifnet/internal/ports"
)

func stsPod(annotation, index string) *corev1.Pod {
	p := pod(annotation, nil)
	p.Labels = map[string]string{"app": "a", names.PodIndexLabel: index}
	return p
}

// A StatefulSet replica's {ordinal} links are resolved and pinned into the annotation: limits,
// link labels and affinity are those of the resolved links, the stored pod validates, and a
// second pass changes nothing.
func TestMutateResolvesOrdinal(t *testing.T) {
	for _, tc := range []struct{ ann, pinned string }{
		{`east@ab-{ordinal},up`, `east@ab-2,up`},
		{`[{"name":"east","link":"ab-{ordinal}"},{"name":"west","link":"{ordinal}-cd-{ordinal}"}]`,
			`[{"name":"east","link":"ab-2"},{"name":"west","link":"2-cd-2"}]`},
	} {
		p := stsPod(tc.ann, "2")
		ops, err := Mutate(p, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.ann, err)
		}
		got := apply(t, p, ops)
		if a := got.Annotations[names.PortsAnnotation]; a != tc.pinned {
			t.Errorf("%s: pinned to %q, want %q", tc.ann, a, tc.pinned)
		}
		want, _ := ports.ParseForPod(tc.ann, p.Labels)
		links := Links(want)
		for _, l := range links {
			if _, ok := got.Labels[LinkLabel(l)]; !ok || strings.Contains(l, "{") {
				t.Errorf("%s: no label for resolved link %s: %v", tc.ann, l, got.Labels)
			}
		}
		terms := got.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		if len(terms) != len(links) || terms[0].LabelSelector.MatchExpressions[0].Key != LinkLabel(links[0]) {
			t.Errorf("%s: affinity %+v, want one term per resolved link %v", tc.ann, terms, links)
		}
		if limit(got.Spec.Containers[0], names.SocketResource) != "2" {
			t.Errorf("%s: socket limit %s, want 2", tc.ann, limit(got.Spec.Containers[0], names.SocketResource))
		}
		if err := Validate(got); err != nil {
			t.Errorf("%s: the stored pod does not validate: %v", tc.ann, err)
		}
		again, _ := Mutate(got, nil)
		for _, op := range again {
			if !strings.HasPrefix(op.Path, "/metadata/labels/") {
				t.Errorf("%s: second pass: %+v", tc.ann, op)
			}
		}
	}
}

// A placeholder hidden by a JSON escape is resolved like any other, and pinned as a JSON list
// that means exactly the resolved ports.
func TestMutatePinsEscapedOrdinal(t *testing.T) {
	p := stsPod(`[{"name":"east","link":"ab-\u007bordinal}"}]`, "7")
	ops, err := Mutate(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ports.Parse(apply(t, p, ops).Annotations[names.PortsAnnotation])
	if err != nil || len(got) != 1 || got[0].Link != "ab-7" {
		t.Fatalf("pinned annotation parses to %+v, %v; want link ab-7", got, err)
	}
}

func TestOrdinalRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, ann, index string // index "-" means no label
		want             string
	}{
		{"no label", `east@ab-{ordinal}`, "-", `has no label apps.kubernetes.io/pod-index`},
		{"leading zero", `east@ab-{ordinal}`, "01", `label apps.kubernetes.io/pod-index="01"`},
		{"negative", `east@ab-{ordinal}`, "-1", `not a plain non-negative decimal`},
		{"not a number", `east@ab-{ordinal}`, "x", `not a plain non-negative decimal`},
		{"other placeholder", `east@ab-{index}`, "1", `the only placeholder is {ordinal}`},
		{"unclosed brace", `east@ab-{ordinal`, "1", `any other brace is refused`},
		{"too long", `east@` + strings.Repeat("a", 62) + `{ordinal}`, "10", `resolves to`},
		{"two ports one link", `east@ab-{ordinal},west@ab-{ordinal}`, "1", `"ab-1" is also used by port 0`},
	} {
		p := stsPod(tc.ann, tc.index)
		if tc.index == "-" {
			delete(p.Labels, names.PodIndexLabel)
		}
		ops, err := Mutate(p, nil)
		var r *Refusal
		if !errors.As(err, &r) || ops != nil || !strings.Contains(err.Error(), tc.want) ||
			!strings.HasPrefix(err.Error(), `metadata.annotations[memifnet.io/ports]: port `) || !strings.Contains(err.Error(), `field "link"`) {
			t.Errorf("%s: Mutate: %v, want a refusal of field \"link\" containing %q", tc.name, err, tc.want)
		}
	}
}

// A stored pod must carry pinned links: one that reached validation with a placeholder (the
// mutating webhook bypassed) is refused, so memif-cni never sees one from an admitted pod.
func TestValidateRefusesUnpinned(t *testing.T) {
	p := stsPod(`east@ab-{ordinal}`, "0")
	p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{names.SocketResource: q("1")}
	p.Labels[LinkLabel("ab-0")] = "east"
	if err := Validate(p); err == nil || !strings.Contains(err.Error(), "memif-webhook") {
		t.Fatalf("Validate of an unpinned annotation: %v, want a refusal", err)
	}
}

// Hostile pods. A bare pod that sets the index label itself gets exactly the patch it gets by
// spelling the resolved link, nothing more. Relabelling a replica after creation is allowed but
// moves nothing: its pinned annotation and link labels still name the link it was placed for.
func TestOrdinalHostile(t *testing.T) {
	forged := stsPod(`east@ab-{ordinal}`, "1")
	literal := stsPod(`east@ab-1`, "1")
	fo, err1 := Mutate(forged, nil)
	lo, err2 := Mutate(literal, nil)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if f, l := apply(t, forged, fo), apply(t, literal, lo); !reflect.DeepEqual(f, l) {
		t.Errorf("a forged index label gives\n%+v\nspelling the link gives\n%+v", f, l)
	}
	old := apply(t, forged, fo)
	relabelled := old.DeepCopy()
	relabelled.Labels[names.PodIndexLabel] = "2"
	if err := ValidateUpdate(old, relabelled); err != nil {
		t.Fatalf("relabel refused: %v", err)
	}
	ps, err := ports.Parse(relabelled.Annotations[names.PortsAnnotation])
	if err != nil || ps[0].Link != "ab-1" {
		t.Errorf("after relabelling, the pod's link is %+v, %v; want ab-1 (pinned at creation)", ps, err)
	}
	// Re-pointing the pinned annotation at the new index is an annotation change: refused.
	repointed := relabelled.DeepCopy()
	repointed.Annotations[names.PortsAnnotation] = `east@ab-2`
	if err := ValidateUpdate(old, repointed); err == nil {
		t.Error("changing the pinned annotation was allowed")
	}
}
