package testenv

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestWaitForReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	err := WaitFor(context.Background(), 5*time.Second, "third call", func(context.Context) (bool, error) {
		calls++
		if calls < 3 {
			return false, errors.New("not yet")
		}
		return true, nil
	})
	if err != nil || calls != 3 {
		t.Errorf("WaitFor = %v after %d calls, want nil after 3", err, calls)
	}
}

func TestWaitForTimeoutNamesTheStateAndTheLastError(t *testing.T) {
	err := WaitFor(context.Background(), 250*time.Millisecond, "deployment web available", func(context.Context) (bool, error) {
		return false, errors.New("0/3 replicas available")
	})
	if err == nil {
		t.Fatal("WaitFor succeeded on a condition that never holds")
	}
	for _, want := range []string{"wait for deployment web available", "0/3 replicas available"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v does not wrap context.DeadlineExceeded", err)
	}
}

// The call the deadline interrupts fails for that reason alone; the timeout quotes what the
// calls before it said of the state.
func TestWaitForTimeoutKeepsTheLastErrorBeforeTheDeadline(t *testing.T) {
	calls := 0
	err := WaitFor(context.Background(), 250*time.Millisecond, "deployment web available", func(ctx context.Context) (bool, error) {
		calls++
		if calls == 1 {
			return false, errors.New("0/1 replicas available")
		}
		<-ctx.Done() // as a client waiting for its rate limiter when the deadline comes
		return false, errors.New("client rate limiter Wait returned an error: context deadline exceeded")
	})
	if err == nil || !strings.Contains(err.Error(), "0/1 replicas available") || strings.Contains(err.Error(), "rate limiter") {
		t.Errorf("WaitFor = %v, want the last error before the deadline (0/1 replicas available)", err)
	}
}

func TestWaitForStopsAtOnceOnAPermanentError(t *testing.T) {
	exited := errors.New("etcd exited: exit status 1")
	start := time.Now()
	err := WaitFor(context.Background(), time.Minute, "etcd ready", func(context.Context) (bool, error) {
		return false, Permanent(exited)
	})
	if !errors.Is(err, exited) {
		t.Errorf("WaitFor = %v, want it to wrap %v", err, exited)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("WaitFor took %s on a permanent error", time.Since(start))
	}
}
