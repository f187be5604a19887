package dra

import (
	"context"
	"fmt"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/memifnet/memifnet/cmd/memif-deviceplugin/internal/observe/portmetrics"
	"github.com/memifnet/memifnet/pkg/memif/portstatus"
)

// ConditionLinkReady is the condition of a socket device's status entry that says whether its
// memif link is up, from the port's status file (portmetrics.Read), beside Ready, which says
// the device is configured (the API's meaning, and DRANET's): like the RDMALinkReady of other
// network drivers, a link that is down does not make the device unconfigured.
const ConditionLinkReady = "LinkReady"

// Reasons of LinkReady.
const (
	ReasonLinkUp        = "LinkUp"
	ReasonLinkDown      = "LinkDown"      // down; the message says why it last went down, if it did
	ReasonNoStatus      = "NoStatus"      // the application writes no status file (yet)
	ReasonStatusStale   = "StatusStale"   // the application stopped rewriting it
	ReasonBadStatusFile = "BadStatusFile" // the file was refused or invalid
)

// linkCondition is LinkReady for one port's reading.
func linkCondition(r portmetrics.Reading) metav1.Condition {
	c := metav1.Condition{Type: ConditionLinkReady, Status: metav1.ConditionFalse}
	switch {
	case r.Reason == portmetrics.ReasonMissing:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, ReasonNoStatus, "the port's application writes no status file"
	case r.Reason != "":
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, ReasonBadStatusFile, "status file "+r.Reason
	case r.Stale:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, ReasonStatusStale, "the status file was not rewritten since "+r.Status.Time.UTC().Format(time.RFC3339)
	case r.Up():
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonLinkUp, "the memif link is connected"
	default:
		c.Reason, c.Message = ReasonLinkDown, "the memif link is "+r.Status.State
		if r.Status.LastDownReason != portstatus.ReasonNone {
			c.Message += fmt.Sprintf("; it last went down: %s: %s", r.Status.LastDownReason, r.Status.LastDownMessage)
		}
	}
	return c
}

// WatchLinks writes every prepared socket device's LinkReady condition into its claim's status
// when it changes, reading the status files every interval until ctx ends. At most one status
// update per claim per interval, however often a pod rewrites its file.
func (d *Driver) WatchLinks(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	reported := map[string]metav1.Condition{} // claim UID/device -> last condition written
	for {
		d.SyncLinks(ctx, reported)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SyncLinks is one pass of WatchLinks.
func (d *Driver) SyncLinks(ctx context.Context, reported map[string]metav1.Condition) {
	now := time.Now()
	live := map[string]bool{}
	for _, c := range d.state.Prepared() {
		if !c.Prepared {
			continue
		}
		want := map[string]metav1.Condition{}
		for _, dev := range c.Devices {
			if dev.Kind != KindSocket || dev.Status == nil {
				continue
			}
			key := c.UID + "/" + dev.Name
			live[key] = true
			cond := linkCondition(portmetrics.Read(d.state.opts.SlotsDir, portmetrics.Port{Port: dev.Status.Port, Slot: dev.Name}, now))
			if old, ok := reported[key]; !ok || old.Status != cond.Status || old.Reason != cond.Reason || old.Message != cond.Message {
				want[dev.Name] = cond
			}
		}
		if len(want) == 0 {
			continue
		}
		if err := d.setConditions(ctx, c, want); err != nil {
			d.log.Warn("dra: cannot report link state in the claim status", "claim", c.Namespace+"/"+c.Name, "err", err)
			continue
		}
		for dev, cond := range want {
			reported[c.UID+"/"+dev] = cond
		}
	}
	for key := range reported {
		if !live[key] {
			delete(reported, key)
		}
	}
}

// setConditions sets conds (by device name) in the claim's status entries of this driver.
func (d *Driver) setConditions(ctx context.Context, c PreparedClaim, conds map[string]metav1.Condition) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := d.client.ResourceV1().ResourceClaims(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if string(cur.UID) != c.UID {
			return fmt.Errorf("claim was replaced (uid %s, prepared %s)", cur.UID, c.UID)
		}
		if !setDeviceConditions(cur, d.state.opts.DriverName, conds) {
			return nil // no entry yet: Prepare's report comes first
		}
		_, err = d.client.ResourceV1().ResourceClaims(c.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// setDeviceConditions sets each device's condition in its status entry (keeping the transition
// time when the status is unchanged) and reports whether it found every entry.
func setDeviceConditions(claim *resourceapi.ResourceClaim, driver string, conds map[string]metav1.Condition) bool {
	found := 0
	for i := range claim.Status.Devices {
		e := &claim.Status.Devices[i]
		cond, ok := conds[e.Device]
		if !ok || e.Driver != driver {
			continue
		}
		meta.SetStatusCondition(&e.Conditions, cond)
		found++
	}
	return found == len(conds)
}
