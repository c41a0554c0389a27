//go:build chaos || e2e

package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aicr-run/aicr-operator/e2e/stack"
	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/bus"
	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// Named timeouts and pauses of the fault injection.
const (
	restartTimeout = 3 * time.Minute
	leaseReadTime  = 2 * time.Second
	// superviseEvery is how often the supervisor looks for processes that exited by themselves.
	superviseEvery = 150 * time.Millisecond
	// exitGrace is how long after a fault ends a leader may still exit because of it: it notices
	// the lost lease at its next renewal.
	exitGrace = 15 * time.Second
	// stallTarget is the recovery target the report compares each fault kind's p99 with.
	stallTarget = 5 * time.Second
	// stallTraceFrom is the shortest stall the report's stall trace lists.
	stallTraceFrom = stallTarget / 2
)

// engineProcess names the fake Argo CD application controller as a fault target.
const engineProcess = "argocd-application-controller"

// fault is one injected fault.
type fault struct {
	kind     string
	target   string
	injected time.Time
	restored time.Time
	// ref is when the stall it causes starts to count: at once when another process carries the
	// work meanwhile, when the fault ends when nothing else can (a singleton), when the lease of
	// a paused leader expired (no candidate may act before).
	ref    time.Time
	double bool
	// note says what the fault did, for the fault log (how many requests a throttle refused).
	note string
}

// faultKind is one kind of fault: run injects it, holds it and ends it, recording the times.
type faultKind struct {
	name string
	// component is what it hits; two faults at once hit two components.
	component string
	run       func(ctx context.Context, m *monkey, f *fault) error
}

// window is a span in which the test expects processes to exit by design: a leader whose lease
// renewals failed (the apiserver or etcd was down, or it was paused) exits so a fresh process
// takes over. who is an instance, or "" for any leader-elected one.
type window struct {
	who      string
	from, to time.Time
}

// monkey injects the faults, one at a time and sometimes two at once, and supervises every
// process: one that exited by itself is started again, as the kubelet would, and reported unless
// a fault explains it.
type monkey struct {
	s      *stack.Stack
	log    func(string, ...any)
	kinds  []faultKind
	engine *engineRunner
	lease  time.Duration // the candidates' lease duration
	// doubleChance is the probability that a fault comes with a second one at once.
	doubleChance float64

	mu         sync.Mutex
	rand       *rand.Rand
	deck       []int
	faults     []*fault
	expected   []window
	exits      int // exits by design, started again
	refusals   int // refuse-application policies made
	violations []string
	locks      map[string]*sync.Mutex
}

func newMonkey(s *stack.Stack, seed int64, eng *engineRunner, log func(string, ...any)) *monkey {
	m := &monkey{s: s, log: log, engine: eng, lease: leaseDuration, doubleChance: 0.2,
		rand: rand.New(rand.NewPCG(uint64(seed), 2)), locks: map[string]*sync.Mutex{}} //nolint:gosec // G115: a seed, any bit pattern will do
	m.kinds = faultKinds(len(s.NATSNodes()) > 1, eng == nil)
	return m
}

// only keeps the fault kinds named in the comma-separated list (every kind when it is empty), and
// returns the names it knows no kind of.
func (m *monkey) only(list string) (unknown []string) {
	if list == "" {
		return nil
	}
	names := strings.Split(list, ",")
	var kept []faultKind
	for _, k := range m.kinds {
		if slices.Contains(names, k.name) {
			kept = append(kept, k)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(m.kinds, func(k faultKind) bool { return k.name == n }) {
			unknown = append(unknown, n)
		}
	}
	m.kinds = kept
	return unknown
}

// faultKinds is the fault model (docs/testing.md); with realArgoCD (-chaos.argocd) the Argo CD
// processes are real ones, and the repo-server is killed too.
func faultKinds(natsCluster, realArgoCD bool) []faultKind {
	kinds := []faultKind{
		{name: "kill-applier", component: "applier", run: killReplica("applier")},
		{name: "pause-applier", component: "applier", run: pauseReplica("applier", time.Second, 5*time.Second)},
		{name: "kill-admission", component: "admission", run: killReplica("admission")},
	}
	for _, b := range leaderElected {
		kinds = append(kinds,
			faultKind{name: "kill-" + b + "-leader", component: b, run: killLeader(b)},
			faultKind{name: "pause-" + b + "-leader", component: b, run: pauseLeader(b)})
	}
	kinds = append(kinds,
		faultKind{name: "kill-nats", component: "nats", run: killNATS(natsCluster)},
		faultKind{name: "kill-kube-apiserver", component: "kube-apiserver", run: killEnv(testenv.ProcAPIServer)},
		faultKind{name: "kill-etcd", component: "etcd", run: killEnv(testenv.ProcEtcd)},
		faultKind{name: "kill-" + engineProcess, component: "argocd", run: killEngine},
	)
	if realArgoCD {
		kinds = append(kinds, faultKind{name: "kill-" + testenv.ProcRepoServer, component: "argocd", run: killArgoCD(testenv.ProcRepoServer)})
	}
	if natsCluster {
		kinds = append(kinds, faultKind{name: "partition-nats", component: "nats", run: partitionNATS},
			faultKind{name: "kill-nats-quorum", component: "nats", run: killNATSQuorum})
	}
	return append(kinds,
		faultKind{name: "throttle-kube-apiserver", component: "api-proxy", run: throttleAPI},
		faultKind{name: "partition-kube-apiserver", component: "api-proxy", run: partitionAPI},
		faultKind{name: "refuse-application", component: "admission-policy", run: refuseApplication},
		faultKind{name: "expire-watches", component: "api-proxy", run: expireWatches},
		faultKind{name: "fill-stream", component: "nats", run: fillStream},
	)
}

// run injects faults until ctx ends, each after a pause of 0.5-3 s; it returns once the
// faults in progress have ended.
func (m *monkey) run(ctx context.Context) {
	for ctx.Err() == nil {
		pause(ctx, m.between(500*time.Millisecond, 3*time.Second))
		if ctx.Err() != nil {
			return
		}
		first, second := m.deal()
		kinds := []*faultKind{first}
		if second != nil {
			kinds = append(kinds, second)
		}
		faults := make([]*fault, len(kinds))
		var wg sync.WaitGroup
		for i, k := range kinds {
			faults[i] = &fault{kind: k.name, double: len(kinds) == 2}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := k.run(context.Background(), m, faults[i]); err != nil {
					m.violate("%s: %v", k.name, err)
				}
				if faults[i].ref.IsZero() {
					faults[i].ref = faults[i].injected
				}
			}()
		}
		wg.Wait()
		// Two at once: a stall counts from the later of their refs, since either may hold the
		// rollout until then.
		for _, f := range faults {
			for _, g := range faults {
				if g.ref.After(f.ref) {
					f.ref = g.ref
				}
			}
			m.record(f)
		}
	}
}

// deal draws the next fault kind from a shuffled deck of every kind (so each kind comes once a
// round), and sometimes a second one of another component.
func (m *monkey) deal() (first, second *faultKind) {
	m.mu.Lock()
	defer m.mu.Unlock()
	draw := func(skip string) *faultKind {
		if len(m.deck) == 0 {
			m.deck = m.rand.Perm(len(m.kinds))
		}
		for i, k := range m.deck {
			if m.kinds[k].component != skip {
				m.deck = slices.Delete(m.deck, i, i+1)
				return &m.kinds[k]
			}
		}
		return nil
	}
	first = draw("")
	if m.rand.Float64() < m.doubleChance {
		second = draw(first.component)
	}
	return first, second
}

func (m *monkey) between(lo, hi time.Duration) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return lo + time.Duration(m.rand.Int64N(int64(hi-lo)+1))
}

func (m *monkey) pick(names []string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return names[m.rand.IntN(len(names))]
}

func (m *monkey) violate(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.violations = append(m.violations, fmt.Sprintf(format, args...))
}

func (m *monkey) record(f *fault) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.faults = append(m.faults, f)
	two := ""
	if f.double {
		two = " (two at once)"
	}
	note := ""
	if f.note != "" {
		note = " (" + f.note + ")"
	}
	m.log("fault %d: %s %s%s at %s for %s%s", len(m.faults), f.kind, f.target, two, f.injected.Format("15:04:05.000"), f.restored.Sub(f.injected).Round(time.Millisecond), note)
}

// expect records that who may exit by design from from to to, and returns the window's index
// for until.
func (m *monkey) expect(who string, from, to time.Time) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expected = append(m.expected, window{who: who, from: from, to: to})
	return len(m.expected) - 1
}

// until ends window i at to.
func (m *monkey) until(i int, to time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expected[i].to = to
}

// lock holds name (an instance, a nats-server, an environment process) for a fault, so the
// supervisor leaves it alone and no other fault touches it.
func (m *monkey) lock(name string) func() {
	m.mu.Lock()
	l := m.locks[name]
	if l == nil {
		l = &sync.Mutex{}
		m.locks[name] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func (m *monkey) tryLock(name string) (func(), bool) {
	m.mu.Lock()
	l := m.locks[name]
	if l == nil {
		l = &sync.Mutex{}
		m.locks[name] = l
	}
	m.mu.Unlock()
	if !l.TryLock() {
		return nil, false
	}
	return l.Unlock, true
}

// leader returns the instance holding binary's Lease, or a random candidate when the Lease
// cannot be read (the apiserver is down: another fault).
func (m *monkey) leader(ctx context.Context, binary string) string {
	ctx, cancel := context.WithTimeout(ctx, leaseReadTime)
	defer cancel()
	candidates := m.s.Instances(binary)
	l, err := m.s.Kube.CoordinationV1().Leases(stack.OperatorNamespace).Get(ctx, "aicr-"+binary, metav1.GetOptions{})
	if err == nil && l.Spec.HolderIdentity != nil && slices.Contains(candidates, *l.Spec.HolderIdentity) {
		return *l.Spec.HolderIdentity
	}
	return m.pick(candidates)
}

// killInstance SIGKILLs instance, leaves it down 0-1 s and starts it again.
func (m *monkey) killInstance(ctx context.Context, f *fault, instance string) error {
	defer m.lock(instance)()
	f.target = instance
	f.injected = time.Now()
	if err := m.s.StopBinary(instance, true); err != nil {
		return err
	}
	pause(ctx, m.between(0, time.Second))
	return m.restart(ctx, f, instance)
}

func (m *monkey) restart(ctx context.Context, f *fault, instance string) error {
	ctx, cancel := context.WithTimeout(ctx, restartTimeout)
	defer cancel()
	err := m.s.StartBinary(ctx, instance)
	f.restored = time.Now()
	if err != nil {
		return fmt.Errorf("start %s again: %w", instance, err)
	}
	return nil
}

// pauseInstance SIGSTOPs instance for hold, then SIGCONTs it.
func (m *monkey) pauseInstance(f *fault, instance string, hold time.Duration) error {
	defer m.lock(instance)()
	f.target = instance
	f.injected = time.Now()
	if err := m.s.Signal(instance, syscall.SIGSTOP); err != nil {
		return err
	}
	pause(context.Background(), hold)
	err := m.s.Signal(instance, syscall.SIGCONT)
	f.restored = time.Now()
	return err
}

func killReplica(binary string) func(context.Context, *monkey, *fault) error {
	return func(ctx context.Context, m *monkey, f *fault) error {
		return m.killInstance(ctx, f, m.pick(m.s.Instances(binary)))
	}
}

// pauseReplica pauses a replica for lo to hi: long enough for its unacknowledged commands to be
// redelivered to the other one, which it then races when it wakes.
func pauseReplica(binary string, lo, hi time.Duration) func(context.Context, *monkey, *fault) error {
	return func(ctx context.Context, m *monkey, f *fault) error {
		return m.pauseInstance(f, m.pick(m.s.Instances(binary)), m.between(lo, hi))
	}
}

func killLeader(binary string) func(context.Context, *monkey, *fault) error {
	return func(ctx context.Context, m *monkey, f *fault) error {
		return m.killInstance(ctx, f, m.leader(ctx, binary))
	}
}

// pauseLeader pauses the leader past its lease's expiry, so another candidate takes over while
// it sleeps; woken, it must not write (kubeaudit_test.go) and exits once it sees the lease lost.
func pauseLeader(binary string) func(context.Context, *monkey, *fault) error {
	return func(ctx context.Context, m *monkey, f *fault) error {
		instance := m.leader(ctx, binary)
		// The other candidate takes the lease up to a retry period after it expires.
		hold := m.lease + retryPeriod + m.between(500*time.Millisecond, 2500*time.Millisecond)
		m.expect(instance, time.Now(), time.Now().Add(hold+exitGrace))
		err := m.pauseInstance(f, instance, hold)
		f.ref = f.injected.Add(m.lease)
		return err
	}
}

func killNATS(cluster bool) func(context.Context, *monkey, *fault) error {
	return func(ctx context.Context, m *monkey, f *fault) error {
		node := m.pick(m.s.NATSNodes())
		defer m.lock(node)()
		f.target = node
		f.injected = time.Now()
		if err := m.s.KillNATS(node); err != nil {
			return err
		}
		pause(ctx, m.between(0, 2*time.Second))
		ctx, cancel := context.WithTimeout(ctx, restartTimeout)
		defer cancel()
		err := m.s.StartNATS(ctx, node)
		f.restored = time.Now()
		if !cluster {
			f.ref = f.restored
		}
		return err
	}
}

// killNATSQuorum SIGKILLs two of the three nodes at once, so no stream or consumer has a quorum,
// leaves them down 0-2 s and starts both again on their stores: nothing can be published or
// acknowledged meanwhile, and nothing else can carry the work, so the stall counts from the
// restart.
func killNATSQuorum(ctx context.Context, m *monkey, f *fault) error {
	nodes := m.s.NATSNodes()
	m.mu.Lock()
	m.rand.Shuffle(len(nodes), func(a, b int) { nodes[a], nodes[b] = nodes[b], nodes[a] })
	m.mu.Unlock()
	nodes = nodes[:2]
	slices.Sort(nodes) // locks in one order: no deadlock with another fault's
	for _, n := range nodes {
		defer m.lock(n)()
	}
	f.target = strings.Join(nodes, "+")
	f.injected = time.Now()
	for _, n := range nodes {
		if err := m.s.KillNATS(n); err != nil {
			return err
		}
	}
	pause(ctx, m.between(0, 2*time.Second))
	ctx, cancel := context.WithTimeout(ctx, restartTimeout)
	defer cancel()
	// Both at once: each waits for a JetStream quorum, which only the other can give.
	errs := make(chan error, len(nodes))
	for _, n := range nodes {
		if err := m.s.SpawnNATS(n); err != nil {
			return err
		}
	}
	for _, n := range nodes {
		go func() { errs <- m.s.WaitNATS(ctx, n) }()
	}
	var err error
	for range nodes {
		err = errors.Join(err, <-errs)
	}
	f.restored = time.Now()
	f.ref = f.restored
	return err
}

// fillStream brings the commands or the events stream to its limit for 1-4 s: its message limit
// set to what it holds, with new messages refused (DiscardNew), as a stream whose limits or
// storage are exhausted refuses them. Publishers must keep their messages and send them again
// (never drop one, and never let a limit drop an old one: the stream's own DiscardOld is not
// used here), then the limit is taken back to the stream's configuration.
func fillStream(ctx context.Context, m *monkey, f *fault) error {
	name := m.pick([]string{bus.StreamCommands, bus.StreamEvents})
	f.target = name
	js, closeNATS, err := m.jetStream(ctx)
	if err != nil {
		return err
	}
	defer closeNATS()
	var orig jetstream.StreamConfig
	f.injected = time.Now()
	err = testenv.WaitFor(ctx, restartTimeout, "fill stream "+name, func(ctx context.Context) (bool, error) {
		st, err := js.Stream(ctx, name)
		if err != nil {
			return false, nil // another fault holds NATS: try again
		}
		info, err := st.Info(ctx)
		if err != nil {
			return false, nil
		}
		orig = info.Config
		full := orig
		full.MaxMsgs = max(int64(info.State.Msgs), 1) //nolint:gosec // G115: a count of messages
		full.Discard = jetstream.DiscardNew
		_, err = js.UpdateStream(ctx, full)
		return err == nil, nil
	})
	if err != nil {
		return err
	}
	pause(ctx, m.between(time.Second, 4*time.Second))
	err = testenv.WaitFor(ctx, restartTimeout, "give stream "+name+" its limits back", func(ctx context.Context) (bool, error) {
		_, err := js.UpdateStream(ctx, orig)
		return err == nil, nil
	})
	f.restored = time.Now()
	f.ref = f.restored
	return err
}

// jetStream connects to NATS as the observer, who may change a stream's configuration.
func (m *monkey) jetStream(ctx context.Context) (jetstream.JetStream, func(), error) {
	nc, err := m.s.ConnectNATS(ctx, "chaos-fill-stream")
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return js, nc.Close, nil
}

// partitionNATS cuts a cluster node off from its peers and clients for 1-6 s.
func partitionNATS(ctx context.Context, m *monkey, f *fault) error {
	node := m.pick(m.s.NATSNodes())
	defer m.lock(node)()
	f.target = node
	f.injected = time.Now()
	if err := m.s.PartitionNATS(node); err != nil {
		return err
	}
	pause(ctx, m.between(time.Second, 6*time.Second))
	err := m.s.HealNATS(node)
	f.restored = time.Now()
	return err
}

// apiThrottle is what throttle-kube-apiserver does to a binary's requests: half answered 429 (a
// third of those without Retry-After, so they reach the binary's own code rather than
// client-go's retry), and every request delayed 50-800 ms (below the 2 s a fenced leader's write
// may take in flight: lease duration minus renew deadline).
var apiThrottle = stack.Throttle{Share: 0.5, NoRetryAfter: 1.0 / 3, MinLatency: 50 * time.Millisecond, MaxLatency: 800 * time.Millisecond}

// throttleAPI throttles every request of every instance of one binary (its API proxies) for
// 2-6 s. The work is not handed to anyone: the stall counts from the injection, since a
// throttled binary must keep moving. A leader whose renewals fail meanwhile exits by design.
func throttleAPI(ctx context.Context, m *monkey, f *fault) error {
	binary := m.pick(stack.Binaries)
	proxies, err := m.apiProxies(binary)
	if err != nil {
		return err
	}
	hold := m.between(2*time.Second, 6*time.Second)
	f.target = binary
	f.injected = time.Now()
	if slices.Contains(leaderElected, binary) {
		for _, i := range m.s.Instances(binary) {
			m.expect(i, f.injected, f.injected.Add(hold+m.lease+exitGrace))
		}
	}
	before := 0
	for _, p := range proxies {
		n, _ := p.Counts()
		before += n
		p.SetThrottle(apiThrottle)
	}
	pause(ctx, hold)
	after := 0
	for _, p := range proxies {
		p.SetThrottle(stack.Throttle{})
		n, _ := p.Counts()
		after += n
	}
	f.restored = time.Now()
	f.note = fmt.Sprintf("%d requests answered 429", after-before)
	return nil
}

// partitionAPI cuts one instance off from the kube-apiserver (its API proxy drops packets, or
// rejects its connections): 1-4 s,
// below what the other candidate waits before it takes a Lease over (lease duration minus a retry
// period), so a write the instance sent before or during the cut, held in flight, lands before any
// other process may act for it (docs/testing.md, Known limits); the stall counts from the heal,
// since what the instance holds (a command it reports in progress, a lease) waits for it.
func partitionAPI(ctx context.Context, m *monkey, f *fault) error {
	binary := m.pick(stack.Binaries)
	instance := m.pick(m.s.Instances(binary))
	p, err := m.s.APIProxy(instance)
	if err != nil {
		return err
	}
	defer m.lock(instance)()
	hold := m.between(time.Second, 4*time.Second)
	f.target = instance
	f.injected = time.Now()
	if slices.Contains(leaderElected, binary) {
		m.expect(instance, f.injected, f.injected.Add(hold+m.lease+exitGrace))
	}
	// Half the cuts drop packets (requests held, nothing closed), half reject (every connection
	// closed, new ones refused: errors that are no API answer reach the process's code).
	if f.note = m.pick([]string{"packets dropped", "connections rejected"}); f.note == "packets dropped" {
		p.Partition()
	} else {
		p.Reject()
	}
	pause(ctx, hold)
	p.Heal()
	f.restored = time.Now()
	f.ref = f.restored
	return nil
}

// expireWatches ends every watch of every process and, for 0.5-2 s, answers each new watch as
// the API server answers a watch from a resourceVersion etcd compacted away (410 Expired), so
// every informer lists again: what a compaction does to a watch that fell behind. From then on
// every watch from a resourceVersion before the fault is answered so too, as after a compaction
// at the revision current when it began: a process that watches again from where it was
// instead of listing never sees another change, and its rollouts stall. (etcd itself is not
// compacted: the etcd audit reads every revision.) Nothing holds the work meanwhile, so the
// stall counts from the injection.
func expireWatches(ctx context.Context, m *monkey, f *fault) error {
	var proxies []*stack.APIProxy
	var instances []string
	for _, b := range stack.Binaries {
		ps, err := m.apiProxies(b)
		if err != nil {
			return err
		}
		proxies = append(proxies, ps...)
		instances = append(instances, m.s.Instances(b)...)
	}
	window := m.between(500*time.Millisecond, 2*time.Second)
	f.target = "every process"
	// The revision now (a quorum list answers it): every watch from before it is compacted
	// away. Without an API server (killed at the same moment) only the window expires watches.
	var compacted uint64
	rctx, cancel := context.WithTimeout(ctx, leaseReadTime)
	list, err := m.s.Dynamic.Resource(v1alpha1.ClusterRuntimeResource).List(rctx, metav1.ListOptions{Limit: 1})
	cancel()
	if err == nil {
		compacted, _ = strconv.ParseUint(list.GetResourceVersion(), 10, 64)
	}
	f.injected = time.Now()
	ended, before := 0, make([]int, len(proxies))
	for i, p := range proxies {
		before[i] = p.Expired()
		ended += p.ExpireWatches(window, compacted)
	}
	pause(ctx, window)
	expired, by := 0, []string{}
	for i, p := range proxies {
		if n := p.Expired() - before[i]; n > 0 {
			expired += n
			by = append(by, fmt.Sprintf("%s %d", instances[i], n))
		}
	}
	f.restored = time.Now()
	f.note = fmt.Sprintf("%d watches ended, %d answered 410 Expired (%s), compacted at %d", ended, expired, strings.Join(by, ", "), compacted)
	return nil
}

// refuseApplication makes the API server refuse every write of one release's Application as
// Forbidden for 1-6 s (an admission policy): a command that keeps failing for a while. The
// applier must redeliver it with backoff until the write passes, neither drop it (a lost command)
// nor park it (the run ends with the parked stream empty: --park-after failures take a minute
// and a half). The stall counts from the policy's removal.
func refuseApplication(ctx context.Context, m *monkey, f *fault) error {
	r := m.pick(releaseNames())
	m.mu.Lock()
	m.refusals++
	policy := fmt.Sprintf("chaos-refuse-%d", m.refusals)
	m.mu.Unlock()
	f.target = r
	f.injected = time.Now()
	allow, err := m.s.RefuseApplication(ctx, policy, r, "chaos: the cluster refuses this Application for a while")
	if err != nil {
		return err
	}
	pause(ctx, m.between(time.Second, 6*time.Second))
	actx, cancel := context.WithTimeout(ctx, restartTimeout)
	defer cancel()
	err = allow(actx)
	f.restored = time.Now()
	f.ref = f.restored
	return err
}

func releaseNames() []string {
	out := make([]string, len(releases))
	for i, r := range releases {
		out[i] = r.name
	}
	return out
}

// apiProxies returns the API proxies of every instance of binary.
func (m *monkey) apiProxies(binary string) ([]*stack.APIProxy, error) {
	var out []*stack.APIProxy
	for _, i := range m.s.Instances(binary) {
		p, err := m.s.APIProxy(i)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// killEnv SIGKILLs etcd or the kube-apiserver, leaves it down 0-1 s and starts it again. The
// leaders may lose their leases meanwhile and exit by design.
func killEnv(name string) func(context.Context, *monkey, *fault) error {
	return func(ctx context.Context, m *monkey, f *fault) error {
		defer m.lock(name)()
		f.target = name
		f.injected = time.Now()
		// Leaders may exit from the moment their renewals fail until they renewed again: the
		// window opens now, for as long as the restart may take, and ends once it is known.
		w := m.expect("", f.injected, f.injected.Add(restartTimeout+m.lease+exitGrace))
		if err := m.s.KillEnv(name); err != nil {
			return err
		}
		pause(ctx, m.between(0, time.Second))
		ctx, cancel := context.WithTimeout(ctx, restartTimeout)
		defer cancel()
		err := m.s.StartEnv(ctx, name)
		f.restored = time.Now()
		f.ref = f.restored
		m.until(w, f.restored.Add(m.lease+exitGrace))
		return err
	}
}

// killArgoCD SIGKILLs a process of the real Argo CD (-chaos.argocd), leaves it down 0-3 s and
// starts it again on its ports. Nothing else does its work meanwhile, so the stall counts from
// the restart.
func killArgoCD(name string) func(context.Context, *monkey, *fault) error {
	return func(ctx context.Context, m *monkey, f *fault) error {
		defer m.lock(name)()
		f.target = name
		f.injected = time.Now()
		if err := m.s.KillEnv(name); err != nil {
			return err
		}
		pause(ctx, m.between(0, 3*time.Second))
		ctx, cancel := context.WithTimeout(ctx, restartTimeout)
		defer cancel()
		err := m.s.StartEnv(ctx, name)
		f.restored = time.Now()
		f.ref = f.restored
		return err
	}
}

// killEngine stops the fake Argo CD application controller for 0-3 s; the new one lists again.
// With real Argo CD it kills the real one (killArgoCD).
func killEngine(ctx context.Context, m *monkey, f *fault) error {
	if m.engine == nil {
		return killArgoCD(testenv.ProcAppController)(ctx, m, f)
	}
	defer m.lock(engineProcess)()
	f.target = engineProcess
	f.injected = time.Now()
	m.engine.stop()
	pause(ctx, m.between(0, 3*time.Second))
	err := m.engine.start()
	f.restored = time.Now()
	f.ref = f.restored
	return err
}

// supervise plays the kubelet until ctx ends: every process that exited by itself is started
// again, and reported unless a fault explains the exit.
func (m *monkey) supervise(ctx context.Context) {
	t := time.NewTicker(superviseEvery)
	defer t.Stop()
	for {
		m.superviseOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (m *monkey) superviseOnce(ctx context.Context) {
	var names []string
	for _, b := range stack.Binaries {
		names = append(names, m.s.Instances(b)...)
	}
	for _, name := range append(names, m.s.NATSNodes()...) {
		unlock, ok := m.tryLock(name)
		if !ok {
			continue // a fault holds it
		}
		if m.s.Crashed(name) {
			m.restartExited(ctx, name)
		}
		unlock()
	}
	env := []string{testenv.ProcEtcd, testenv.ProcAPIServer}
	if m.engine == nil {
		env = append(env, testenv.ProcRedis, testenv.ProcRepoServer, testenv.ProcAppController)
	}
	for _, name := range env {
		unlock, ok := m.tryLock(name)
		if !ok {
			continue
		}
		if !m.s.EnvAlive(name) {
			m.violate("%s exited by itself (see its log)", name)
			sctx, cancel := context.WithTimeout(ctx, restartTimeout)
			if err := m.s.StartEnv(sctx, name); err != nil {
				m.violate("start %s again: %v", name, err)
			}
			cancel()
		}
		unlock()
	}
}

// restartExited starts an instance that exited by itself again, after deciding whether a fault
// explains it: a leader-elected process whose last words are a lost lease, within a window.
func (m *monkey) restartExited(ctx context.Context, name string) {
	status := m.s.ExitStatus(name)
	last := lastLines(m.s.LogPath(name), 3)
	now := time.Now()
	byDesign := false
	if slices.Contains(leaderElected, stack.BinaryOf(name)) && len(last) > 0 && strings.Contains(last[len(last)-1], "lost leadership of lease") {
		m.mu.Lock()
		for _, w := range m.expected {
			if (w.who == "" || w.who == name) && !now.Before(w.from) && !now.After(w.to) {
				byDesign = true
			}
		}
		m.mu.Unlock()
	}
	if byDesign {
		m.mu.Lock()
		m.exits++
		m.mu.Unlock()
	} else {
		m.violate("%s exited by itself (%s), not because of a fault; its last lines:\n  %s", name, status, strings.Join(last, "\n  "))
	}
	_ = m.s.StopBinary(name, true)
	sctx, cancel := context.WithTimeout(ctx, restartTimeout)
	defer cancel()
	var err error
	if slices.Contains(m.s.NATSNodes(), name) {
		err = m.s.StartNATS(sctx, name)
	} else {
		err = m.s.StartBinary(sctx, name)
	}
	if err != nil {
		m.violate("start %s again: %v", name, err)
	}
}

// counts returns the faults injected per kind.
func (m *monkey) counts() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for _, k := range m.kinds {
		out[k.name] = 0
	}
	for _, f := range m.faults {
		out[f.kind]++
	}
	return out
}

// short says how many faults were injected so far.
func (m *monkey) short() string {
	c := m.counts()
	total := 0
	for _, n := range c {
		total += n
	}
	return fmt.Sprintf("%d faults", total)
}

// below returns the kinds injected fewer than atLeast times.
func (m *monkey) below(atLeast int) []string {
	var out []string
	for k, n := range m.counts() {
		if n < atLeast {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// stall is what one fault cost the rollout in flight (stallOf).
type stall struct {
	// d is the longest span without progress, from to to.
	d        time.Duration
	from, to time.Time
	// next is the progress that ended it ("" when the next fault cut it).
	next string
	// measured is false when no rollout was in flight around the fault; cut when the next
	// fault ended the span before the rollout moved again (d is then a lower bound).
	measured, cut bool
}

// stalls measures every fault of faults (stallOf), in order: the next fault (not f's partner of
// two at once) ends what can be blamed on f.
func stalls(faults []*fault, progress []progressEvent, windows [][2]time.Time) []stall {
	out := make([]stall, len(faults))
	for i, f := range faults {
		until := time.Time{}
		for _, g := range faults[i+1:] {
			if g.injected.After(f.injected) {
				until = g.injected
				break
			}
		}
		out[i] = stallOf(f, progress, windows, until)
	}
	return out
}

// measuredBelow returns the kinds with fewer than atLeast measured stalls so far.
func (m *monkey) measuredBelow(atLeast int, progress []progressEvent, windows [][2]time.Time) []string {
	if atLeast <= 0 {
		return nil
	}
	m.mu.Lock()
	faults := slices.Clone(m.faults)
	kinds := m.kinds
	m.mu.Unlock()
	n := map[string]int{}
	for i, st := range stalls(faults, progress, windows) {
		if st.measured {
			n[faults[i].kind]++
		}
	}
	var out []string
	for _, k := range kinds {
		if n[k.name] < atLeast {
			out = append(out, k.name)
		}
	}
	return out
}

// report prints the faults by kind with the stall each caused the rollout in flight (stallOf):
// how many were measured, their p50, p99 and max; then the stall trace, every measured stall of
// at least stallTraceFrom with its fault and the span without progress, to read beside the
// processes' logs.
//
// It returns a violation for each kind whose p99 is above bound (none when bound is 0).
func (m *monkey) report(logf func(string, ...any), progress []progressEvent, windows [][2]time.Time, bound time.Duration) (violations []string) {
	m.mu.Lock()
	faults := slices.Clone(m.faults)
	exits, kinds := m.exits, m.kinds
	m.mu.Unlock()
	byKind := map[string][]time.Duration{}
	counts := map[string]int{}
	cut := map[string]int{}
	doubles := 0
	all := stalls(faults, progress, windows)
	var trace []string
	for i, f := range faults {
		counts[f.kind]++
		if f.double {
			doubles++
		}
		st := all[i]
		if st.measured {
			byKind[f.kind] = append(byKind[f.kind], st.d)
		}
		if st.cut {
			cut[f.kind]++
		}
		if st.measured && st.d >= stallTraceFrom {
			next := "cut by the next fault"
			if !st.cut {
				next = "then " + st.next
			}
			trace = append(trace, fmt.Sprintf("  %5.1fs  fault %d %s %s (injected %s, ref %s, ended %s): no progress %s-%s, %s",
				st.d.Seconds(), i+1, f.kind, f.target, clock(f.injected), clock(f.ref), clock(f.restored), clock(st.from), clock(st.to), next))
		}
	}
	logf("faults injected: %d (%d of them two at once); %d exits by design (a leader's lost lease) started again", len(faults), doubles, exits)
	logf("  %-36s %8s %8s %4s   %s", "kind", "injected", "measured", "cut", "stall of the rollout in flight: p50 / p99 / max")
	for _, k := range kinds {
		s := byKind[k.name]
		line := fmt.Sprintf("  %-36s %8d %8d %4d", k.name, counts[k.name], len(s), cut[k.name])
		if len(s) > 0 {
			slices.Sort(s)
			p99 := percentile(s, 0.99)
			line += fmt.Sprintf("   %s / %s / %s", percentile(s, 0.5).Round(10*time.Millisecond), p99.Round(10*time.Millisecond), s[len(s)-1].Round(10*time.Millisecond))
			if p99 > stallTarget {
				line += fmt.Sprintf("  (p99 above the %s target)", stallTarget)
			}
			if bound > 0 && p99 > bound {
				violations = append(violations, fmt.Sprintf("fault kind %s: p99 stall of the rollout in flight %s, above the recovery bound %s (-chaos.recovery-bound); see the stall trace",
					k.name, p99.Round(10*time.Millisecond), bound))
			}
		}
		logf("%s", line)
	}
	logf("  (p99 is the nearest rank: of fewer than 100 measurements it is the max; cut: measurements that the next fault ended before the rollout moved again, lower bounds)")
	logf("stall trace: %d measured stalls of %s or more", len(trace), stallTraceFrom)
	for _, l := range trace {
		logf("%s", l)
	}
	return violations
}

func clock(t time.Time) string { return t.Format("15:04:05.000") }

// stallOf is how long the rollouts stopped progressing because of f: the longest span without
// progress (a rollout's phase or a step's state changing, or a rollout's bundle being applied)
// that ends after f.ref and begins before the fault ended, counted from f.ref at the earliest
// and until the next fault's injection at the latest (cut then). Only spans within a
// rollout count (windows: from its bundle's apply to its end), and none that begins while a
// rollout waits for a person's approval. It is not measured when no rollout was in flight
// around the fault.
func stallOf(f *fault, progress []progressEvent, windows [][2]time.Time, until time.Time) (out stall) {
	events := slices.Clone(progress)
	for _, w := range windows {
		events = append(events, progressEvent{at: w[0], what: "the next bundle applied"})
	}
	slices.SortFunc(events, func(a, b progressEvent) int { return a.at.Compare(b.at) })
	end := f.restored
	if end.Before(f.ref) {
		end = f.ref
	}
	for i := 0; i+1 < len(events); i++ {
		from, to := events[i], events[i+1]
		if from.waiting || !to.at.After(f.ref) || !from.at.Before(end) || !sameWindow(windows, from.at, to.at) {
			continue
		}
		start := from.at
		if start.Before(f.ref) {
			start = f.ref
		}
		stop, cut := to.at, false
		if !until.IsZero() && until.Before(stop) {
			stop, cut = until, true
		}
		if !stop.After(start) {
			continue
		}
		out.measured = true
		if gap := stop.Sub(start); gap > out.d {
			out.d, out.from, out.to, out.cut, out.next = gap, start, stop, cut, to.what
		}
	}
	return out
}

// sameWindow reports whether a and b fall in one window.
func sameWindow(windows [][2]time.Time, a, b time.Time) bool {
	for _, w := range windows {
		if !a.Before(w[0]) && !b.After(w[1]) {
			return true
		}
	}
	return false
}

// percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// engineRunner runs the fake Argo CD application controller, and stops and starts it again for
// the fault kill-argocd-application-controller.
type engineRunner struct {
	s *stack.Stack

	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	cur     *engine
	writes  int
	relists int
	starts  int
}

func (r *engineRunner) start() error {
	e, err := newEngine(r.s)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.run(ctx) }()
	r.mu.Lock()
	r.cancel, r.done, r.cur = cancel, done, e
	r.starts++
	r.mu.Unlock()
	return nil
}

func (r *engineRunner) stop() {
	r.mu.Lock()
	cancel, done, e := r.cancel, r.done, r.cur
	r.cancel, r.cur = nil, nil
	r.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
	r.mu.Lock()
	r.writes += e.writes
	r.relists += e.relists
	r.mu.Unlock()
}
