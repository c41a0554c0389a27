package testenv

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/rest"
)

// current is the environment RunMain started for this test binary.
var current struct {
	env *Env
	// skip is why there is no environment (tools missing and not required).
	skip error
}

// requireTools reports whether AICR_REQUIRE_TOOLS=1 turns missing tools into failures.
func requireTools() bool { return os.Getenv(EnvRequireTools) == "1" }

// RunMain starts the package's environment, runs the tests and stops it; TestMain passes its
// result to os.Exit. When a test failed, the tail of every process's log is printed first.
// Tests get the environment from Current.
//
// When tools are missing it still runs the tests (unit tests of the package keep running) and
// Current skips those that need the environment; with AICR_REQUIRE_TOOLS=1 it fails at once
// instead. Any other start failure fails the package, after the process logs were printed.
func RunMain(m *testing.M, opts Options) int {
	env, err := Start(opts)
	switch {
	case err == nil:
	case errors.Is(err, ErrToolsMissing) && !requireTools():
		fmt.Fprintf(os.Stderr, "%v\ntestenv: tests that need the environment are skipped\n", err)
		current.skip = err
		return m.Run()
	default:
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	current.env = env
	code := m.Run()
	if code != 0 {
		env.dumpLogs(os.Stderr) // what the processes said is gone with Stop
	}
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: testenv: stop: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Current returns the environment RunMain started. It skips t when the tools are missing (see
// RunMain), and fails it when RunMain was not used.
func Current(t testing.TB) *Env {
	t.Helper()
	switch {
	case current.env != nil:
		return current.env
	case current.skip != nil:
		t.Skip(current.skip.Error())
	default:
		t.Fatal("testenv.Current: no environment; start one in TestMain with testenv.RunMain")
	}
	return nil
}

// StartT starts an environment of the test's own and stops it in t.Cleanup, printing the tail of
// every process's log first when the test failed. Missing tools skip the test, or fail it with
// AICR_REQUIRE_TOOLS=1.
func StartT(t testing.TB, opts Options) *Env {
	t.Helper()
	env, err := Start(opts)
	if err != nil {
		if errors.Is(err, ErrToolsMissing) && !requireTools() {
			t.Skip(err.Error())
		}
		t.Fatalf("start test environment: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			env.dumpLogs(os.Stderr)
		}
		if err := env.Stop(); err != nil {
			t.Errorf("stop test environment: %v", err)
		}
	})
	return env
}

// ConfigFor returns a copy of Config that impersonates user with groups (the admin identity may
// impersonate anyone), for checking what RBAC lets a user do.
func (e *Env) ConfigFor(user string, groups ...string) *rest.Config {
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return cfg
}

// ServiceAccountConfig returns a copy of Config that acts as the service account namespace/name,
// with the groups the apiserver gives service accounts. The ServiceAccount need not exist.
func (e *Env) ServiceAccountConfig(namespace, name string) *rest.Config {
	return e.ConfigFor("system:serviceaccount:"+namespace+":"+name,
		"system:serviceaccounts", "system:serviceaccounts:"+namespace, "system:authenticated")
}
