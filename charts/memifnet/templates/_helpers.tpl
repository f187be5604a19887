{{/* The namespace of every namespaced object. */}}
{{- define "memifnet.namespace" -}}
{{- .Values.namespace.name -}}
{{- end -}}

{{/* The image of every container. */}}
{{- define "memifnet.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* The labels of every object (the kustomize base's); the pod templates carry part-of too. */}}
{{- define "memifnet.labels" -}}
app.kubernetes.io/part-of: memifnet
{{- end -}}

{{/*
The node's CNI bin dir, conf dir and kubelet kubeconfig: cni.binDir, cni.confDir and
cni.kubeletKubeconfig, else cni.preset's (manifests/components/cni-paths/<preset>).
Call with (list . "binDir"|"confDir"|"kubeletKubeconfig").
*/}}
{{- define "memifnet.cniPath" -}}
{{- $root := index . 0 -}}
{{- $key := index . 1 -}}
{{- $presets := dict
  "kubeadm" (dict "binDir" "/opt/cni/bin" "confDir" "/etc/cni/net.d" "kubeletKubeconfig" "/etc/kubernetes/kubelet.conf")
  "rke2" (dict "binDir" "/opt/cni/bin" "confDir" "/etc/cni/net.d" "kubeletKubeconfig" "/var/lib/rancher/rke2/agent/kubelet.kubeconfig")
  "k3s" (dict "binDir" "/var/lib/rancher/k3s/data/cni" "confDir" "/var/lib/rancher/k3s/agent/etc/cni/net.d" "kubeletKubeconfig" "/var/lib/rancher/k3s/agent/kubelet.kubeconfig")
  "openshift" (dict "binDir" "/var/lib/cni/bin" "confDir" "/etc/kubernetes/cni/net.d" "kubeletKubeconfig" "/var/lib/kubelet/kubeconfig")
-}}
{{- $preset := get $presets $root.Values.cni.preset -}}
{{- if not $preset }}{{ fail (printf "cni.preset %q: want kubeadm, k3s, rke2 or openshift" $root.Values.cni.preset) }}{{ end -}}
{{- index $root.Values.cni $key | default (index $preset $key) -}}
{{- end -}}

{{/* Whether memif-cni is chained (else Multus); fails on another mode. */}}
{{- define "memifnet.chained" -}}
{{- if eq .Values.cni.mode "chained" -}}true
{{- else if ne .Values.cni.mode "multus" -}}{{ fail (printf "cni.mode %q: want chained or multus" .Values.cni.mode) }}
{{- end -}}
{{- end -}}

{{/* The service account name the DRA admission policies match. */}}
{{- define "memifnet.agentUser" -}}
{{- printf "system:serviceaccount:%s:memifnet" (include "memifnet.namespace" .) -}}
{{- end -}}
