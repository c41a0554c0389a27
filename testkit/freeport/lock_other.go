//go:build !linux

package freeport

// lockPort claims nothing beyond the process elsewhere: ports come from the kernel there (see
// belowEphemeral).
func lockPort(int) bool { return true }

// heldElsewhere: no process holds a port here (see lockPort).
func heldElsewhere(int) bool { return false }
