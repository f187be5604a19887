package resource

// Free is how many devices the kubelet can hand out now: healthy and not handed out (a device
// handed out stays dirty, and so used, until it is scrubbed). With Stats().Dirty, the used and
// free of the resource.
func (r *Resource) Free() int {
	dirty := r.led.DirtyIDs()
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for id, err := range r.health {
		if _, used := dirty[id]; err == nil && !used {
			n++
		}
	}
	return n
}
