package manifests

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestChartLint: `helm lint --strict` passes with the default values and with each pair's; a
// value the chart does not know how to render fails the rendering with a message naming it.
func TestChartLint(t *testing.T) {
	for _, p := range append(chartPairs(), chartPair{name: "options", values: chartOptionValues()}) {
		vf := filepath.Join(t.TempDir(), "values.yaml")
		y, _ := yaml.Marshal(p.values)
		if err := os.WriteFile(vf, y, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := helm(t, "lint", "--strict", chartDir, "--values", vf); err != nil {
			t.Errorf("helm lint --strict (%s): %v\n%s", p.name, err, out)
		}
	}
	for _, bad := range []struct{ set, want string }{
		{"cni.mode=thick", `cni.mode "thick": want chained or multus`},
		{"cni.preset=minikube", `cni.preset "minikube": want kubeadm, k3s, rke2 or openshift`},
	} {
		// helm lint reports a template's fail only as INFO: helm template (and install) fail.
		out, err := helm(t, "template", "memifnet", chartDir, "--set", bad.set)
		if err == nil || !strings.Contains(out, bad.want) {
			t.Errorf("helm template --set %s: %v, want a failure saying %q:\n%s", bad.set, err, bad.want, out)
		}
	}
}

// chartOptionValues sets what has no kustomize counterpart: another namespace, node label and
// metrics settings, both Prometheus Operator monitors, a metrics reader, the DRA driver.
func chartOptionValues() map[string]any {
	return map[string]any{
		"namespace": map[string]any{"name": "cnf-net"},
		"nodeLabel": map[string]any{"key": "example.com/memif", "value": "on"},
		"dra":       map[string]any{"enabled": true},
		"metrics": map[string]any{
			"auth":           false,
			"readers":        []any{map[string]any{"name": "prometheus-k8s", "namespace": "monitoring"}},
			"podMonitor":     map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}},
			"serviceMonitor": map[string]any{"enabled": true},
		},
	}
}

// TestChartOptions: the chart's own settings land where they should. Everything namespaced is
// in namespace.name, and the DRA policies match the agent's user there; the agents select the
// node label given; metrics.auth false drops --metrics-auth and the auth-delegator binding;
// metrics.readers are bound to memifnet-metrics-reader; the PodMonitor and the ServiceMonitor
// (with its headless Service) scrape the agents' metrics port over HTTPS. By default neither
// monitor nor a reader binding is rendered.
func TestChartOptions(t *testing.T) {
	objs := canonical(t, "chart", renderChart(t, chartOptionValues()))
	for key, o := range objs {
		if ns := strings.Split(key, "/")[1]; ns != "" && ns != "cnf-net" && key != "Role/default/memifnet-dra-events" &&
			key != "RoleBinding/default/memifnet-dra-events" {
			t.Errorf("%s: not in namespace cnf-net", key)
		}
		if strings.Contains(mustYAML(t, o), "memifnet-system") {
			t.Errorf("%s names memifnet-system:\n%s", key, mustYAML(t, o))
		}
	}
	for _, key := range []string{"ValidatingAdmissionPolicy//memifnet-dra-resourceslices", "ValidatingAdmissionPolicy//memifnet-dra-claim-status"} {
		if !strings.Contains(mustYAML(t, objs[key]), "system:serviceaccount:cnf-net:memifnet") {
			t.Errorf("%s does not match the agent's user in cnf-net", key)
		}
	}
	for _, ds := range []string{"memifnet-node", "memifnet-node-small"} {
		y := mustYAML(t, objs["DaemonSet/cnf-net/"+ds])
		for _, want := range []string{"example.com/memif: \"on\"", "--metrics-auth=false"} {
			if !strings.Contains(y, want) {
				t.Errorf("DaemonSet %s lacks %s", ds, want)
			}
		}
		if strings.Contains(y, "memifnet.io/node") {
			t.Errorf("DaemonSet %s still selects memifnet.io/node", ds)
		}
	}
	if _, ok := objs["ClusterRoleBinding//memifnet-node-auth-delegator"]; ok {
		t.Error("metrics.auth false keeps the system:auth-delegator binding")
	}
	if y := mustYAML(t, objs["ClusterRoleBinding//memifnet-metrics-reader"]); !strings.Contains(y, "name: prometheus-k8s\n  namespace: monitoring") {
		t.Errorf("the metrics reader binding:\n%s", y)
	}
	checkMonitors(t, objs)
	for key := range canonical(t, "chart", renderChart(t, nil)) {
		if kind := strings.Split(key, "/")[0]; kind == "PodMonitor" || kind == "ServiceMonitor" || key == "ClusterRoleBinding//memifnet-metrics-reader" {
			t.Errorf("default values render %s", key)
		}
	}
}

func checkMonitors(t *testing.T, objs map[string]map[string]any) {
	t.Helper()
	for key, want := range map[string][]string{
		"PodMonitor/cnf-net/memifnet-node": {"release: prom", "app.kubernetes.io/name: memifnet-node", "port: metrics",
			"scheme: https", "insecureSkipVerify: true", "podMetricsEndpoints:"},
		"ServiceMonitor/cnf-net/memifnet-node": {"app.kubernetes.io/name: memifnet-node", "port: metrics", "scheme: https",
			"bearerTokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token", "endpoints:"},
		"Service/cnf-net/memifnet-node-metrics": {"clusterIP: None", "app.kubernetes.io/name: memifnet-node", "port: 9102", "targetPort: metrics"},
	} {
		o, ok := objs[key]
		if !ok {
			t.Errorf("%s not rendered", key)
			continue
		}
		y := mustYAML(t, o)
		for _, w := range want {
			if !strings.Contains(y, w) {
				t.Errorf("%s lacks %q:\n%s", key, w, y)
			}
		}
	}
	if pm := objs["PodMonitor/cnf-net/memifnet-node"]; pm != nil && !slices.Contains([]any{"monitoring.coreos.com/v1"}, pm["apiVersion"]) {
		t.Errorf("PodMonitor apiVersion %v", pm["apiVersion"])
	}
}

func mustYAML(t *testing.T, v any) string {
	t.Helper()
	y, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(y)
}
