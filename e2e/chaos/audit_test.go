//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

// applicationsKey is where the kube-apiserver (default --etcd-prefix) stores the engine
// namespace's Applications, as JSON.
const applicationsKey = "/registry/argoproj.io/applications/" + stack.EngineNamespace + "/"

// etcdDialTimeout bounds connecting to etcd, which is never killed.
const etcdDialTimeout = 10 * time.Second

// auditor records every Application write from etcd's watch: every revision the kube-apiserver
// stored, in order, including the writes right around an apiserver restart that a watch through
// the apiserver could only see as a relist. It checks:
//   - a step's Application has one spec: no step ID maps to two different spec contents (a
//     stale or duplicated command that wrote another spec under a step would show here);
//   - an Application never goes back to a step it left (a stale command of an earlier rollout
//     rewriting it);
//   - no Application is deleted (the chaos bundles only upgrade).
type auditor struct {
	mu         sync.Mutex
	specs      map[string]map[string]string // application -> step -> spec JSON
	steps      map[string][]string          // application -> steps in the order written
	writes     int
	violations []string
	done       chan struct{}
}

// startAuditor watches etcd from its current revision until ctx ends; wait for done after.
func startAuditor(ctx context.Context, etcdURL string) (*auditor, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdURL}, DialTimeout: etcdDialTimeout})
	if err != nil {
		return nil, fmt.Errorf("connect to etcd: %w", err)
	}
	cur, err := cli.Get(ctx, applicationsKey, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("read etcd revision: %w", err)
	}
	a := &auditor{specs: map[string]map[string]string{}, steps: map[string][]string{}, done: make(chan struct{})}
	wch := cli.Watch(clientv3.WithRequireLeader(ctx), applicationsKey, clientv3.WithPrefix(), clientv3.WithRev(cur.Header.Revision+1))
	go func() {
		defer close(a.done)
		defer cli.Close()
		for resp := range wch {
			if err := resp.Err(); err != nil {
				if ctx.Err() == nil {
					a.violate("the etcd audit of Application writes broke off: %v", err)
				}
				return
			}
			for _, ev := range resp.Events {
				a.observe(ev)
			}
		}
	}()
	return a, nil
}

func (a *auditor) violate(format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.violations = append(a.violations, fmt.Sprintf(format, args...))
}

func (a *auditor) observe(ev *clientv3.Event) {
	name := strings.TrimPrefix(string(ev.Kv.Key), applicationsKey)
	if ev.Type == clientv3.EventTypeDelete {
		a.violate("Application %s was deleted (etcd revision %d)", name, ev.Kv.ModRevision)
		return
	}
	var u unstructured.Unstructured
	if err := json.Unmarshal(ev.Kv.Value, &u.Object); err != nil {
		a.violate("Application %s at etcd revision %d: not JSON: %v", name, ev.Kv.ModRevision, err)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.writes++
	step := u.GetAnnotations()[v1alpha1.AnnotationStep]
	if step == "" {
		return
	}
	spec, _ := json.Marshal(u.Object["spec"]) // maps marshal with sorted keys
	if a.specs[name] == nil {
		a.specs[name] = map[string]string{}
	}
	if prev, ok := a.specs[name][step]; ok && prev != string(spec) {
		a.violations = append(a.violations, fmt.Sprintf("Application %s written twice under step %s with different specs (etcd revision %d):\n  first: %s\n  then:  %s", name, step, ev.Kv.ModRevision, prev, spec))
	} else if !ok {
		a.specs[name][step] = string(spec)
	}
	seen := a.steps[name]
	if n := len(seen); n == 0 || seen[n-1] != step {
		for _, s := range seen {
			if s == step {
				a.violations = append(a.violations, fmt.Sprintf("Application %s went back to step %s after %s (etcd revision %d)", name, step, seen[n-1], ev.Kv.ModRevision))
				break
			}
		}
		a.steps[name] = append(seen, step)
	}
}

// report returns the violations and a summary.
func (a *auditor) report() ([]string, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	apps := make([]string, 0, len(a.steps))
	steps := 0
	for app, s := range a.steps {
		apps = append(apps, app)
		steps += len(s)
	}
	sort.Strings(apps)
	return append([]string(nil), a.violations...), fmt.Sprintf("%d Application writes stored, %d steps written over %d Applications", a.writes, steps, len(apps))
}
