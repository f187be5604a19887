package manifests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// The Helm chart (charts/memifnet) and these manifests are one install written twice: for each
// kustomize choice (overlay, component) the chart has values, and TestChartMatchesKustomize
// renders both and compares the objects after decoding. The chart is rendered by the helm CLI of
// hack/build-tools.sh (helm.sh/helm/v4, built in its own scratch module outside the repository:
// Helm's library would move this module's Kubernetes dependencies to its own version).
const chartDir = "../charts/memifnet"

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helmBinary builds (or reuses) the pinned helm CLI; a failed build fails the test.
func helmBinary(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		var out, errb bytes.Buffer
		cmd := exec.Command("../hack/build-tools.sh", "helm")
		cmd.Stdout, cmd.Stderr = &out, &errb
		if helmErr = cmd.Run(); helmErr != nil {
			helmErr = fmt.Errorf("hack/build-tools.sh helm: %w\n%s", helmErr, errb.String())
			return
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		helmPath = filepath.Join(lines[len(lines)-1], "helm")
	})
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	return helmPath
}

// helm runs the helm CLI with its state in a temporary home (no user config, no repositories).
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBinary(t), args...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home+"/config", "HELM_CACHE_HOME="+home+"/cache",
		"HELM_DATA_HOME="+home+"/data", "KUBECONFIG="+home+"/none")
	// stdout only: helm logs notes on stderr (a symlinked file in the chart, at INFO).
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out) + stderr.String(), err
	}
	return string(out), nil
}

// renderChart is `helm template` of the chart with values (a values file), one YAML per object.
func renderChart(t *testing.T, values map[string]any) [][]byte {
	t.Helper()
	vf := filepath.Join(t.TempDir(), "values.yaml")
	y, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vf, y, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := helm(t, "template", "memifnet", chartDir, "--values", vf)
	if err != nil {
		t.Fatalf("helm template with %s: %v\n%s", y, err, out)
	}
	var docs [][]byte
	for _, d := range strings.Split("\n"+out, "\n---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(d), &m); err != nil {
			t.Fatalf("helm template output: %v\n%s", err, d)
		}
		if len(m) > 0 {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

// renderKustomize builds a kustomization of resources and components (paths relative to this
// directory), one YAML per object.
func renderKustomize(t *testing.T, resources, components []string) [][]byte {
	t.Helper()
	dir := t.TempDir()
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, here)
	if err != nil {
		t.Fatal(err)
	}
	var k strings.Builder
	for key, paths := range map[string][]string{"resources": resources, "components": components} {
		fmt.Fprintf(&k, "%s:\n", key)
		for _, p := range paths {
			fmt.Fprintf(&k, "  - %s\n", filepath.Join(rel, p))
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize %v %v: %v", resources, components, err)
	}
	var docs [][]byte
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, y)
	}
	return docs
}

// canonical decodes each object strictly (the Kubernetes types, as the manifests' own tests do;
// kinds of other projects as plain maps) and keys its canonical form by kind/namespace/name.
func canonical(t *testing.T, what string, docs [][]byte) map[string]map[string]any {
	t.Helper()
	objs := map[string]map[string]any{}
	for _, y := range docs {
		var hdr struct {
			Kind     string
			Metadata struct{ Name, Namespace string }
		}
		if err := yaml.Unmarshal(y, &hdr); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		key := hdr.Kind + "/" + hdr.Metadata.Namespace + "/" + hdr.Metadata.Name
		var m map[string]any
		if !slices.Contains([]string{"PodMonitor", "ServiceMonitor"}, hdr.Kind) {
			obj := decode(t, what+": "+key, y)
			if n, ok := obj.(*nadObject); ok {
				obj = n.nad
			}
			j, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			y = j
		}
		if err := yaml.Unmarshal(y, &m); err != nil {
			t.Fatalf("%s: %s: %v", what, key, err)
		}
		if _, dup := objs[key]; dup {
			t.Fatalf("%s: %s twice", what, key)
		}
		objs[key] = normalizeObject(t, m)
	}
	return objs
}

// normalizeObject puts equal meanings in equal forms: the YAML and JSON documents inside a
// ConfigMap or a NetworkAttachmentDefinition decoded, and the lists Kubernetes keys by name
// (volumes, volumeMounts, env) sorted by name: their order means nothing.
func normalizeObject(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	if m["kind"] == "ConfigMap" {
		data, _ := m["data"].(map[string]any)
		for k, v := range data {
			var doc any
			if err := yaml.Unmarshal([]byte(v.(string)), &doc); err != nil {
				t.Fatalf("ConfigMap data %s: %v", k, err)
			}
			data[k] = doc
		}
	}
	if spec, ok := m["spec"].(map[string]any); ok && m["kind"] == "NetworkAttachmentDefinition" {
		var doc any
		if err := json.Unmarshal([]byte(spec["config"].(string)), &doc); err != nil {
			t.Fatalf("NetworkAttachmentDefinition config: %v", err)
		}
		spec["config"] = doc
	}
	sortNamed(m)
	return m
}

func sortNamed(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if l, ok := e.([]any); ok && (k == "volumes" || k == "volumeMounts" || k == "env") {
				slices.SortFunc(l, func(a, b any) int {
					return strings.Compare(fmt.Sprint(a.(map[string]any)["name"]), fmt.Sprint(b.(map[string]any)["name"]))
				})
			}
			sortNamed(e)
		}
	case []any:
		for _, e := range v {
			sortNamed(e)
		}
	}
}

// objectDiffs lists every object one side has and the other not, and every difference.
func objectDiffs(chart, kust map[string]map[string]any) []string {
	var diffs []string
	for key, k := range kust {
		c, ok := chart[key]
		if !ok {
			diffs = append(diffs, key+": kustomize has it, the chart not")
			continue
		}
		if !reflect.DeepEqual(c, k) {
			cy, _ := yaml.Marshal(c)
			ky, _ := yaml.Marshal(k)
			diffs = append(diffs, key+" differs (- kustomize, + chart):\n"+lineDiff(string(ky), string(cy)))
		}
	}
	for key := range chart {
		if _, ok := kust[key]; !ok {
			diffs = append(diffs, key+": the chart has it, kustomize not")
		}
	}
	slices.Sort(diffs)
	return diffs
}

// lineDiff lists the lines only one side has (- kustomize, + chart), enough to find a drift.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for _, l := range al {
		if !slices.Contains(bl, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range bl {
		if !slices.Contains(al, l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}
