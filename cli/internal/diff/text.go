package diff

import (
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/aicr-run/aicr-operator/cli/internal/style"
)

// Text writes a summary line per release that changes, then a unified diff of each changed
// Application (the compared part, as YAML), coloured on a terminal.
func Text(w io.Writer, r *Result, st style.Style) error {
	var b strings.Builder
	target := "nothing (the runtime is being deleted)"
	if r.Plan != "" {
		target = "plan " + r.Plan
	}
	fmt.Fprintf(&b, "%s (%s) against the live Applications in %s:\n", target, r.Source, r.EngineNamespace)
	width := 0
	for _, c := range r.Changes {
		width = max(width, len(c.Release))
	}
	unchanged := 0
	for _, c := range r.Changes {
		if c.Action == Unchanged {
			unchanged++
			continue
		}
		line := fmt.Sprintf("  %-9s %s", c.Action, style.Pad(style.Escape(c.Release), width))
		switch {
		case c.Action == Foreign:
			line += "  not the operator's (another runtime's UID): never touched; the rollout blocks on it"
		case len(c.Fields) > 0:
			line += "  " + style.Escape(strings.Join(c.Fields, ", "))
		}
		b.WriteString(strings.TrimRight(st.State(actionState(c.Action), line), " ") + "\n")
	}
	switch {
	case r.Changed() == 0:
		fmt.Fprintf(&b, "  no changes: the live Applications are what the plan renders (%d releases)\n", unchanged)
	case unchanged > 0:
		fmt.Fprintf(&b, "  %d unchanged\n", unchanged)
	}
	for _, c := range r.Changes {
		if c.Action == Unchanged || c.Action == Foreign {
			continue
		}
		from, to := "/dev/null", "/dev/null"
		if c.Live != nil {
			from = "live/" + r.EngineNamespace + "/" + c.Release
		}
		if c.Desired != nil {
			to = "desired/" + r.EngineNamespace + "/" + c.Release
		}
		a, err := yamlLines(c.Live)
		if err != nil {
			return err
		}
		d, err := yamlLines(c.Desired)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "\n%s\n%s\n", st.Bold("--- "+style.Escape(from)), st.Bold("+++ "+style.Escape(to)))
		for _, l := range Unified(a, d, 3) {
			l = style.Escape(l)
			switch {
			case strings.HasPrefix(l, "+"):
				l = st.State("Succeeded", l)
			case strings.HasPrefix(l, "-"):
				l = st.State("Failed", l)
			case strings.HasPrefix(l, "@@"):
				l = st.Dim(l)
			}
			b.WriteString(l + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func actionState(action string) string {
	switch action {
	case Install, Upgrade, Apply:
		return "InProgress"
	case Remove, Foreign:
		return "Failed"
	}
	return "Unchanged"
}

func yamlLines(obj map[string]any) ([]string, error) {
	if obj == nil {
		return nil, nil
	}
	out, err := yaml.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode application: %w", err)
	}
	return strings.Split(strings.TrimRight(string(out), "\n"), "\n"), nil
}

// Unified is a unified diff of a and b with context lines around each change: hunks headed
// "@@ -l,n +l,n @@" and lines prefixed " ", "-" or "+".
func Unified(a, b []string, context int) []string {
	ops := lcsOps(a, b)
	var out []string
	// Group the ops into hunks: runs of changes with up to 2*context equal lines between them.
	i := 0
	for i < len(ops) {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(i-context, 0)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*context {
				end = min(end+context, len(ops))
				break
			}
			end = run
		}
		aStart, bStart, aLen, bLen := ops[start].ai, ops[start].bi, 0, 0
		var lines []string
		for _, op := range ops[start:end] {
			switch op.kind {
			case ' ':
				aLen++
				bLen++
			case '-':
				aLen++
			case '+':
				bLen++
			}
			lines = append(lines, string(op.kind)+op.text)
		}
		out = append(out, fmt.Sprintf("@@ -%s +%s @@", hunkRange(aStart, aLen), hunkRange(bStart, bLen)))
		out = append(out, lines...)
		i = end
	}
	return out
}

func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

type op struct {
	kind   byte // ' ', '-' or '+'
	text   string
	ai, bi int // positions in a and b before this op
}

// lcsOps is the edit script of a longest common subsequence of the lines.
func lcsOps(a, b []string) []op {
	n, m := len(a), len(b)
	// lcs[i][j] is the LCS length of a[i:] and b[j:].
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []op
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			ops = append(ops, op{' ', a[i], i, j})
			i++
			j++
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, op{'-', a[i], i, j})
			i++
		default:
			ops = append(ops, op{'+', b[j], i, j})
			j++
		}
	}
	return ops
}
