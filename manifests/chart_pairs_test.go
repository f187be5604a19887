package manifests

import (
	"strings"
	"testing"
)

// chartPair is one choice made both ways: chart values and the kustomization that makes it.
type chartPair struct {
	name       string
	values     map[string]any
	resources  []string
	components []string
}

func chartPairs() []chartPair {
	pairs := []chartPair{
		{"default", nil, []string{"."}, nil},
		{"multus", map[string]any{"cni": map[string]any{"mode": "multus"}}, []string{"overlays/multus"}, nil},
		{"dra", map[string]any{"dra": map[string]any{"enabled": true}}, []string{"overlays/dra"}, nil},
		{"cert-manager", map[string]any{"certManager": map[string]any{"enabled": true}}, []string{"overlays/cert-manager"}, nil},
		{"dra+cert-manager", map[string]any{"dra": map[string]any{"enabled": true}, "certManager": map[string]any{"enabled": true}},
			[]string{"overlays/dra"}, []string{"components/cert-manager"}},
		{"dashboard", map[string]any{"dashboard": map[string]any{"enabled": true}}, []string{".", "dashboards"}, nil},
	}
	for _, preset := range []string{"kubeadm", "k3s", "rke2", "openshift"} {
		for _, mode := range []string{"chained", "multus"} {
			pairs = append(pairs, chartPair{mode + "+" + preset,
				map[string]any{"cni": map[string]any{"mode": mode, "preset": preset}},
				[]string{"overlays/" + mode}, []string{"components/cni-paths/" + preset}})
		}
	}
	return pairs
}

// TestChartMatchesKustomize: for every choice the kustomize manifests offer (overlay, cert-manager,
// cni-paths per distribution and CNI mode, the dashboard), the chart with the matching values
// renders the same objects, compared after strict decoding (the Kubernetes types; the documents
// inside ConfigMaps and the NetworkAttachmentDefinition parsed; name-keyed lists in name order).
func TestChartMatchesKustomize(t *testing.T) {
	for _, p := range chartPairs() {
		t.Run(p.name, func(t *testing.T) {
			chart := canonical(t, "chart", renderChart(t, p.values))
			kust := canonical(t, "kustomize", renderKustomize(t, p.resources, p.components))
			for _, d := range objectDiffs(chart, kust) {
				t.Error(d)
			}
			if len(kust) < 20 {
				t.Errorf("kustomize rendered %d objects: the comparison covers too little", len(kust))
			}
		})
	}
}

// The comparison is live: a chart value that changes one field of one object is reported
// against that object, as a drift in the chart's templates would be.
func TestChartComparisonDetectsDrift(t *testing.T) {
	for _, c := range []struct {
		overlay string
		values  map[string]any
		want    []string // the objects the differences are in
	}{
		{".", map[string]any{"image": map[string]any{"tag": "v9"}}, []string{"DaemonSet/memifnet-system/memifnet-node ",
			"DaemonSet/memifnet-system/memifnet-node-small ", "Deployment/memifnet-system/memifnet-webhook "}},
		{".", map[string]any{"profiles": map[string]any{"small": map[string]any{"config": map[string]any{"socketSlots": 31}}}},
			[]string{"ConfigMap/memifnet-system/memifnet-deviceplugin "}},
		{".", map[string]any{"nodeLabel": map[string]any{"value": "yes"}}, []string{"DaemonSet/memifnet-system/memifnet-node ",
			"DaemonSet/memifnet-system/memifnet-node-small "}},
		{".", map[string]any{"webhook": map[string]any{"replicas": 3}}, []string{"Deployment/memifnet-system/memifnet-webhook "}},
		{"overlays/multus", map[string]any{"cni": map[string]any{"mode": "multus", "kubeletKubeconfig": "/x"}},
			[]string{"NetworkAttachmentDefinition/memifnet-system/memif "}},
	} {
		chart := canonical(t, "chart", renderChart(t, c.values))
		kust := canonical(t, "kustomize", renderKustomize(t, []string{c.overlay}, nil))
		diffs := objectDiffs(chart, kust)
		ok := len(diffs) == len(c.want)
		for i := 0; ok && i < len(diffs); i++ {
			ok = strings.HasPrefix(diffs[i], c.want[i])
		}
		if !ok {
			t.Errorf("chart values %v against %s: differences %q, want one in each of %q", c.values, c.overlay, diffs, c.want)
		}
	}
}
