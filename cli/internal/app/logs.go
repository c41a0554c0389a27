package app

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"

	"github.com/aicr-run/aicr-operator/cli/internal/check"
	"github.com/aicr-run/aicr-operator/cli/internal/kube"
	"github.com/aicr-run/aicr-operator/cli/internal/logs"
)

// logFollowPoll is how often logs -f --log-dir looks for lines appended to the files.
const logFollowPoll = 250 * time.Millisecond

type logsOptions struct {
	filter logs.Filter
	fields []string
	since  time.Duration
	follow bool
	output string
	dir    string
}

func newLogsCmd(o *options) *cobra.Command {
	var lo logsOptions
	cmd := &cobra.Command{
		Use:   "logs [--rollout R] [--step N] [--since D] [-f] [-o json]",
		Short: "The five binaries' logs, merged by time, of one rollout or step",
		Long: `Read the logs of the operator's five binaries (planner, applier, readiness, credrefresher,
admission): every pod of their Deployments in the operator namespace, through the API server,
merged into one stream by each line's time (the lines of one pod stay in their order). Every
binary writes JSON lines with the shared fields rollout, step, release, plan_digest, msg_id, ...;
the flags keep the lines that match:

  --rollout R        lines of rollout R: its rollout field, a step of it (R/N) or a message of it
  --step N           with --rollout, lines of step N of it (R/N); alone, a step ID R/N
  --field KEY=VALUE  any field, repeatable (--field release=gpu-operator --field component=applier)
  --level LEVEL      lines at this level or above (trace, debug, info, warn, error)
  --since D          lines of the last D (5m, 1h)

On a terminal (the default text) a line reads "15:04:05.000 planner INFO message rollout=...
step=... release=... other=fields", time in UTC; -o json prints the lines as the binaries wrote
them, one JSON object per line, for jq. With -f the command follows the pods' logs (lines are
printed as they arrive) until Ctrl-C.

The local stack (make demo, the e2e tests) runs the binaries as processes, not pods: give its log
folder with --log-dir (the demo prints it; each process writes <dir>/<binary>[-N].log) and the
files are read, filtered and merged the same way.`,
		Example: `  # Everything about one rollout, across the five binaries
  kubectl aicr logs --rollout r-172ca57c59-none

  # Step 6 of it, live
  kubectl aicr logs --rollout r-172ca57c59-none --step 6 -f

  # The last ten minutes' warnings, as JSON for jq
  kubectl aicr logs --since 10m --level warn -o json | jq .message

  # The local stack's processes (make demo prints the folder: "ls <dir>/logs")
  kubectl aicr logs --log-dir "$STACK_DIR/logs" --rollout r-172ca57c59-none`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := lo.validate(o.env.Clock.Now()); err != nil {
				return err
			}
			if lo.dir != "" {
				return o.logsFromFiles(cmd.Context(), lo)
			}
			kc, err := o.client()
			if err != nil {
				return err
			}
			return o.logsFromPods(cmd.Context(), kc, lo)
		},
	}
	f := cmd.Flags()
	f.StringVar(&lo.filter.Rollout, "rollout", "", "Only the lines of this rollout")
	f.StringVar(&lo.filter.Step, "step", "", "Only the lines of this step: its index with --rollout, else its ID ROLLOUT/N")
	f.StringArrayVar(&lo.fields, "field", nil, "Only the lines whose field KEY is VALUE (KEY=VALUE; repeatable)")
	f.StringVar(&lo.filter.Level, "level", "", "Only the lines at this level or above: trace, debug, info, warn or error")
	f.DurationVar(&lo.since, "since", 0, "Only the lines of this last duration, such as 5m or 1h (default: all)")
	f.BoolVarP(&lo.follow, "follow", "f", false, "Follow the logs until Ctrl-C")
	f.StringVarP(&lo.output, "output", "o", "text", "Output format: text (one readable line each) or json (the lines as written)")
	f.StringVar(&lo.dir, "log-dir", "", "Read the local stack's log files in this folder instead of pods")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions("text", "json"))
	_ = cmd.RegisterFlagCompletionFunc("level", fixedCompletions("trace", "debug", "info", "warn", "error"))
	return cmd
}

func (lo *logsOptions) validate(now time.Time) error {
	switch lo.output {
	case "text", "json":
	default:
		return usagef("-o %q: use text or json", lo.output)
	}
	if err := logs.ValidateLevel(lo.filter.Level); err != nil {
		return usageError{err}
	}
	if lo.since < 0 {
		return usagef("--since %s: use a positive duration, such as 10m", lo.since)
	}
	if lo.since > 0 {
		lo.filter.Since = now.Add(-lo.since)
	}
	if lo.filter.Step != "" && lo.filter.Rollout == "" && !strings.Contains(lo.filter.Step, "/") {
		return usagef("--step %q: give --rollout too, or the step's ID ROLLOUT/N", lo.filter.Step)
	}
	for _, kv := range lo.fields {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usagef("--field %q: use KEY=VALUE, such as release=gpu-operator", kv)
		}
		if lo.filter.Fields == nil {
			lo.filter.Fields = map[string]string{}
		}
		lo.filter.Fields[k] = v
	}
	return nil
}

// print writes one line as -o says.
func (lo *logsOptions) print(w io.Writer, l logs.Line) error {
	if lo.output == "json" {
		_, err := fmt.Fprintf(w, "%s\n", l.Raw)
		return err
	}
	_, err := fmt.Fprintln(w, escapeKeepLines(logs.Text(l)))
	return err
}

// source is one log to read: a pod's container, or a file.
type source struct {
	name string
	open func(ctx context.Context, follow bool) (io.ReadCloser, error)
}

// logsFromPods reads the logs of the operator's pods.
func (o *options) logsFromPods(ctx context.Context, kc *kube.Client, lo logsOptions) error {
	sel := fmt.Sprintf("%s=%s,%s in (%s)", kube.LabelPartOf, kube.PartOfOperator, kube.LabelComponent, strings.Join(check.BinaryNames, ","))
	pods, err := kc.Kube.CoreV1().Pods(kc.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("list the operator's pods in %s: %w", kc.Namespace, err)
	}
	var sources []source
	for _, p := range pods.Items {
		if len(p.Spec.Containers) == 0 {
			continue
		}
		pod, container := p.Name, p.Spec.Containers[0].Name
		sources = append(sources, source{name: pod, open: func(ctx context.Context, follow bool) (io.ReadCloser, error) {
			opts := &corev1.PodLogOptions{Container: container, Follow: follow}
			if lo.since > 0 {
				secs := int64(lo.since.Seconds()) + 1
				opts.SinceSeconds = &secs
			}
			rc, err := kc.Kube.CoreV1().Pods(kc.Namespace).GetLogs(pod, opts).Stream(ctx)
			if err != nil {
				return nil, fmt.Errorf("logs of pod %s/%s: %w", kc.Namespace, pod, err)
			}
			return rc, nil
		}})
	}
	if len(sources) == 0 {
		return fmt.Errorf("no pod of the operator's binaries in %s (labelled %s): is -n the operator namespace? The local stack runs processes: read their log files with --log-dir", kc.Namespace, sel)
	}
	slices.SortFunc(sources, func(a, b source) int { return strings.Compare(a.name, b.name) })
	return o.readLogs(ctx, sources, lo, nil)
}

// localLogName says whether a file of the local stack's log folder is a binary's log:
// <binary>.log or <binary>-<instance>.log.
func localLogName(name string) bool {
	base, ok := strings.CutSuffix(name, ".log")
	if !ok {
		return false
	}
	for _, b := range v1alpha1.Binaries() {
		if base == b || strings.HasPrefix(base, b+"-") {
			return true
		}
	}
	return false
}

// logsFromFiles reads the local stack's log files.
func (o *options) logsFromFiles(ctx context.Context, lo logsOptions) error {
	entries, err := os.ReadDir(lo.dir)
	if err != nil {
		return fmt.Errorf("--log-dir %s: %w", lo.dir, err)
	}
	var sources []source
	for _, e := range entries {
		if e.IsDir() || !localLogName(e.Name()) {
			continue
		}
		path := filepath.Join(lo.dir, e.Name())
		sources = append(sources, source{name: strings.TrimSuffix(e.Name(), ".log"), open: func(context.Context, bool) (io.ReadCloser, error) {
			return os.Open(path)
		}})
	}
	if len(sources) == 0 {
		return fmt.Errorf("--log-dir %s: no binary's log in it (<binary>.log or <binary>-N.log, for %s)", lo.dir, strings.Join(v1alpha1.Binaries(), ", "))
	}
	return o.readLogs(ctx, sources, lo, func(rc io.ReadCloser) io.Reader { return &tailReader{ctx: ctx, r: rc} })
}

// readLogs reads every source to its end, merges the lines by time and prints them; with
// follow it then prints each new line as it arrives. wrapFollow turns a file into a reader that
// waits for more (nil: the source follows by itself).
func (o *options) readLogs(ctx context.Context, sources []source, lo logsOptions, wrapFollow func(io.ReadCloser) io.Reader) error {
	w := o.env.Stdout
	if !lo.follow {
		var all [][]logs.Line
		skipped := 0
		for _, s := range sources {
			rc, err := s.open(ctx, false)
			if err != nil {
				return err
			}
			lines, n, err := logs.Read(s.name, rc, lo.filter)
			rc.Close()
			if err != nil {
				return err
			}
			all, skipped = append(all, lines), skipped+n
		}
		for _, l := range logs.Merge(all) {
			if err := lo.print(w, l); err != nil {
				return err
			}
		}
		if skipped > 0 {
			fmt.Fprintf(o.env.Stderr, "%d line(s) that are not JSON objects left out\n", skipped)
		}
		return nil
	}
	lines := make(chan logs.Line)
	errs := make(chan error, len(sources))
	var wg sync.WaitGroup
	for _, s := range sources {
		rc, err := s.open(ctx, true)
		if err != nil {
			return err
		}
		var r io.Reader = rc
		if wrapFollow != nil {
			r = wrapFollow(rc)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer rc.Close()
			sc := bufio.NewScanner(r)
			sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
			for sc.Scan() {
				l, ok := logs.Parse(s.name, sc.Bytes())
				if !ok || !lo.filter.Match(l) {
					continue
				}
				select {
				case lines <- l:
				case <-ctx.Done():
					return
				}
			}
			if err := sc.Err(); err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("read %s: %w", s.name, err)
			}
		}()
	}
	go func() { wg.Wait(); close(lines) }()
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return nil
			}
			if err := lo.print(w, l); err != nil {
				return err
			}
		case err := <-errs:
			return err
		case <-ctx.Done():
			return nil
		}
	}
}

// tailReader reads a file and, at its end, waits for more (tail -f) until ctx ends.
type tailReader struct {
	ctx context.Context
	r   io.Reader
}

func (t *tailReader) Read(p []byte) (int, error) {
	for {
		n, err := t.r.Read(p)
		if n > 0 || (err != nil && !errors.Is(err, io.EOF)) {
			return n, err
		}
		select {
		case <-t.ctx.Done():
			return 0, io.EOF
		case <-time.After(logFollowPoll):
		}
	}
}
