//go:build !failpoints

// Package failpoint lets tests crash the plugin after a chosen step of ADD. In normal builds Hit
// does nothing; build with -tags failpoints to enable it.
package failpoint

// Hit is a no-op outside failpoint builds.
func Hit(string) {}
