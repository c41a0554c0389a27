package app

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aicr-run/aicr-operator/cli/internal/kube"
	"github.com/aicr-run/aicr-operator/cli/internal/output"
	"github.com/aicr-run/aicr-operator/cli/internal/screen"
	"github.com/aicr-run/aicr-operator/cli/internal/style"
	"github.com/aicr-run/aicr-operator/cli/internal/view"
)

// liveView is one watch-driven view: status --watch, describe --watch.
type liveView struct {
	follow kube.FollowOptions
	// screen is the terminal frame of a snapshot.
	screen func(s kube.Snapshot, now time.Time, st style.Style) ([]string, error)
	// doc is what -o prints of a snapshot (json, yaml, name, templates), one per change.
	doc func(s kube.Snapshot) output.Doc
	// done says the view has reached its end (Ready, an outcome).
	done func(s kube.Snapshot) bool
}

// runLive follows the API server and shows each change: on a terminal one screen redrawn in
// place (and once a second for the elapsed times, from what the watch last said); otherwise one
// line per change, or with -o the document again after each change. It returns when the view is
// done or ctx ends (Ctrl-C).
func (o *options) runLive(ctx context.Context, kc *kube.Client, out *output.Flags, v liveView) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	snaps := kc.Follow(ctx, v.follow)
	w := o.env.Stdout
	st := o.style(w)
	var scr *screen.Screen
	var tick <-chan time.Time
	if fd, tty := screen.Terminal(w); tty && out.IsText() {
		scr = screen.New(w, fd)
		defer func() { _ = scr.Close() }()
		t := o.env.Clock.NewTicker(time.Second)
		defer t.Stop()
		tick = t.C()
	}
	changes := view.NewChanges()
	var last kube.Snapshot
	have := false
	lastKey, lastErr := "", ""
	for {
		select {
		case <-ctx.Done():
			return nil
		case s, ok := <-snaps:
			if !ok {
				return nil
			}
			if !s.Synced && s.Err == nil {
				continue
			}
			last, have = s, true
		case <-tick:
			if !have {
				continue
			}
		}
		now := o.env.Clock.Now()
		switch {
		case scr != nil:
			lines, err := v.screen(last, now, st)
			if err != nil {
				return err
			}
			foot := st.Dim(fmt.Sprintf("watching · %s · Ctrl-C to stop", now.Format("15:04:05")))
			if last.Err != nil {
				foot = st.State("Failed", "error: "+style.Escape(last.Err.Error())) + st.Dim(" (retrying)")
			}
			if err := scr.Draw(append(lines, "", foot)); err != nil {
				return err
			}
		case out.IsText():
			var rt, ro = runtimeOf(last), rolloutOf(last)
			for _, l := range changes.Lines(v.follow.Runtime, rt, ro, now) {
				if _, err := fmt.Fprintln(w, l); err != nil {
					return err
				}
			}
			if e := errString(last.Err); e != lastErr {
				lastErr = e
				if e != "" {
					fmt.Fprintf(w, "%s error: %s (retrying)\n", now.Format("15:04:05"), style.Escape(e))
				}
			}
		default:
			if key := snapshotKey(last); key != lastKey && last.Synced {
				lastKey = key
				if err := out.Print(w, v.doc(last)); err != nil {
					return err
				}
			}
		}
		if last.Synced && v.done(last) {
			return nil
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// snapshotKey changes when either object changes.
func snapshotKey(s kube.Snapshot) string {
	var b strings.Builder
	if s.Runtime != nil {
		b.WriteString(s.Runtime.ResourceVersion)
	}
	b.WriteByte('/')
	if s.Rollout != nil {
		b.WriteString(s.Rollout.ResourceVersion)
	}
	return b.String()
}

// textOf escapes what the cluster says before it reaches a terminal.
func textOf(render func(io.Writer) error) func(io.Writer) error {
	return func(w io.Writer) error {
		var b strings.Builder
		if err := render(&b); err != nil {
			return err
		}
		_, err := io.WriteString(w, escapeKeepLines(b.String()))
		return err
	}
}

func escapeKeepLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = style.Escape(l)
	}
	return strings.Join(lines, "\n")
}
