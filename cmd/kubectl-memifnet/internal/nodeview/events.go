package nodeview

import (
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/memifnet/memifnet/cmd/internal/eventreason"
)

// The node agent's Events on its Node (cmd/internal/eventreason says what each means). Their
// messages begin "unit <id> " and "device <id> ".
const (
	EventUnitWithheld = eventreason.UnitWithheld
	EventUnitRefilled = eventreason.UnitRefilled
	EventScrubFailed  = eventreason.ScrubFailed
	EventRecovered    = eventreason.Recovered
)

// AddAgentEvents puts the agent's Events about the node into the report (newest first) and
// every unit or device whose newest Event says withheld or scrub failed under Unhealthy.
func (rep *Report) AddAgentEvents(evs []corev1.Event) {
	var mine []corev1.Event
	for _, e := range evs {
		switch e.Reason {
		case EventUnitWithheld, EventUnitRefilled, EventScrubFailed, EventRecovered:
			mine = append(mine, e)
		}
	}
	sort.SliceStable(mine, func(i, j int) bool { return eventTime(&mine[i]).After(eventTime(&mine[j])) })
	rep.Events = mine
	seen := map[string]bool{}
	for _, e := range mine {
		unit := e.Message
		if f := strings.Fields(e.Message); len(f) > 1 && (f[0] == "unit" || f[0] == "device") {
			unit = f[1]
		}
		if seen[unit] {
			continue
		}
		seen[unit] = true
		if e.Reason == EventUnitWithheld || e.Reason == EventScrubFailed {
			rep.Unhealthy = append(rep.Unhealthy, e.Message+" (the agent's Event)")
		}
	}
}

func eventTime(e *corev1.Event) (t time.Time) {
	t = e.LastTimestamp.Time
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	if e.EventTime.After(t) {
		t = e.EventTime.Time
	}
	if t.IsZero() {
		t = e.FirstTimestamp.Time
	}
	return t
}
