package freeport

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// lockName is the file in the temporary directory whose bytes stand for ports: a process holds
// a write lock on byte p while port p is its own.
const lockName = "aicr-freeport.lock"

// lockFile is opened once and never closed: closing any descriptor of the file would drop
// every lock this process holds on it. nil where it cannot be opened for writing (another
// user's file): then ports are claimed within the process only.
var lockFile = sync.OnceValue(func() *os.File {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), lockName), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil
	}
	return f
})

// lockPort claims port for this process on the machine: false when another process holds it.
// The lock is not waited for, and the kernel drops it when this process exits.
func lockPort(port int) bool {
	f := lockFile()
	if f == nil {
		return true
	}
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart, Start: int64(port), Len: 1}
	err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk)
	// EAGAIN or EACCES: another process holds it. Any other error (no locks on this file
	// system) leaves the claim to this process's own record, as without the file.
	return err == nil || !(errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES))
}

// heldElsewhere reports whether another process holds port's lock, without taking it.
func heldElsewhere(port int) bool {
	f := lockFile()
	if f == nil {
		return false
	}
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart, Start: int64(port), Len: 1}
	return syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk) == nil && lk.Type != syscall.F_UNLCK
}
