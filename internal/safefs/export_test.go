package safefs

// UseWalk makes resolve use the component walk of kernels without openat2 until the returned
// func is called (for the external tests).
func UseWalk() (restore func()) {
	forceWalk = true
	return func() { forceWalk = false }
}
