package manifests

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// The node agent's DaemonSet upgrades without two agents on a node, in every overlay (the DRA
// overlay included): the old pod stops before the new one starts (maxSurge 0, one node at a
// time). One process serves the device plugin and the DRA driver from one state dir, and its
// device plugin sockets have fixed names, so the overlap a surge brings (kubeletplugin's
// RollingUpdate option) is not safe for it (docs/deviceplugin.md, "Upgrades").
func TestNodeAgentUpgradesWithoutOverlap(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			ds := daemonSet(t, build(t, dir))
			s := ds.Spec.UpdateStrategy
			if s.Type != appsv1.RollingUpdateDaemonSetStrategyType || s.RollingUpdate == nil {
				t.Fatalf("updateStrategy %+v, want RollingUpdate", s)
			}
			ru := s.RollingUpdate
			if ru.MaxSurge == nil || ru.MaxSurge.IntValue() != 0 {
				t.Errorf("maxSurge %v, want 0: two agents must not share a node's state dir", ru.MaxSurge)
			}
			if ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 1 {
				t.Errorf("maxUnavailable %v, want 1 (one node at a time)", ru.MaxUnavailable)
			}
			for _, c := range ds.Spec.Template.Spec.Containers {
				for _, e := range c.Env {
					if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.uid" {
						t.Errorf("container %s gets the pod UID (%s): kubeletplugin.RollingUpdate needs a surge this DaemonSet does not allow", c.Name, e.Name)
					}
				}
			}
		})
	}
}
