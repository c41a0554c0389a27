package graph

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"

	"github.com/aicr-run/aicr-operator/cli/internal/style"
)

// Text draws the graph in layers from top to bottom: each layer's releases joined by a bracket,
// an arrow down to the next layer, and after each release the releases it waits for:
//
//	rollout r-1: 3/9 steps succeeded [######------------]
//
//	1 ┬ ✓ cert-manager           #1 Install   Succeeded
//	  └ ✓ nfd                    #3 Install   Succeeded
//	  ▼
//	2 ─ ● gpu-operator           #5 Install   InProgress  ← cert-manager, nfd
func Text(w io.Writer, g *Graph, st style.Style) error {
	var b strings.Builder
	b.WriteString(st.Bold(style.Escape(g.Title)))
	if g.Steps > 0 {
		fmt.Fprintf(&b, ": %d/%d steps succeeded %s", g.Succeeded, g.Steps, style.Bar(g.Succeeded, g.Steps, 20))
	} else {
		b.WriteString(": no steps")
	}
	b.WriteString("\n\n")
	if len(g.Nodes) == 0 {
		b.WriteString("  (no releases)\n")
	}
	nameW := 0
	for _, n := range g.Nodes {
		nameW = max(nameW, len(n.Name)+gateWidth(n))
	}
	layers := g.Layers()
	numW := len(strconv.Itoa(len(layers)))
	for li, layer := range layers {
		for i, n := range layer {
			num := strings.Repeat(" ", numW)
			if i == 0 {
				num = fmt.Sprintf("%*d", numW, li+1)
			}
			var bracket string
			switch {
			case len(layer) == 1:
				bracket = "─"
			case i == 0:
				bracket = "┬"
			case i == len(layer)-1:
				bracket = "└"
			default:
				bracket = "├"
			}
			name := style.Escape(n.Name)
			if n.ReadinessGate {
				name += " (gate)"
			}
			step := "  -"
			if n.Step > 0 {
				step = fmt.Sprintf("#%-2d", n.Step)
			}
			action := n.Action
			if action == "" {
				action = "-"
			}
			line := fmt.Sprintf("%s %s %s %s %s %-8s %s", num, bracket,
				st.State(n.State, style.Symbol(n.State)), style.Pad(name, nameW), step, action, st.State(n.State, style.Pad(n.State, 16)))
			if len(n.After) > 0 {
				line += st.Dim(" ← " + style.Escape(strings.Join(n.After, ", ")))
			}
			b.WriteString(strings.TrimRight(line, " "))
			b.WriteByte('\n')
		}
		if li < len(layers)-1 {
			fmt.Fprintf(&b, "%s ▼\n", strings.Repeat(" ", numW))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func gateWidth(n Node) int {
	if n.ReadinessGate {
		return len(" (gate)")
	}
	return 0
}

// colours are the fill and line colours of each state in the pictures.
var colours = map[string][2]string{
	string(v1alpha1.StepSucceeded):        {"#c8e6c9", "#2e7d32"},
	string(v1alpha1.StepInProgress):       {"#fff3c4", "#f9a825"},
	string(v1alpha1.StepPending):          {"#ffffff", "#546e7a"},
	string(v1alpha1.StepAwaitingApproval): {"#f3e5f5", "#8e24aa"},
	string(v1alpha1.StepFailed):           {"#ffcdd2", "#c62828"},
	string(v1alpha1.StepBlocked):          {"#ffe0b2", "#e65100"},
	StateUnchanged:                        {"#eceff1", "#90a4ae"},
}

func colourOf(state string) [2]string {
	if c, ok := colours[state]; ok {
		return c
	}
	return colours[string(v1alpha1.StepPending)]
}

func caption(n Node) string {
	if n.Step == 0 {
		return "unchanged"
	}
	return fmt.Sprintf("#%d %s · %s", n.Step, n.Action, n.State)
}

func summary(g *Graph) string {
	if g.Steps == 0 {
		return g.Title + ": no steps"
	}
	return fmt.Sprintf("%s: %d/%d steps succeeded", g.Title, g.Succeeded, g.Steps)
}

// Dot writes the graph in Graphviz's language, left to right, a node per release filled by its
// state (dot -Tpng renders it).
func Dot(w io.Writer, g *Graph) error {
	var b strings.Builder
	b.WriteString("digraph rollout {\n")
	fmt.Fprintf(&b, "  graph [rankdir=LR, label=%s, labelloc=t, fontname=\"Helvetica\", fontsize=14, nodesep=0.25, ranksep=0.5];\n", dotQuote(summary(g)))
	b.WriteString("  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=11, penwidth=1.5];\n")
	b.WriteString("  edge [color=\"#78909c\", arrowsize=0.7];\n")
	for _, layer := range g.Layers() {
		b.WriteString("  { rank=same;")
		for _, n := range layer {
			fmt.Fprintf(&b, " %s;", dotQuote(n.Name))
		}
		b.WriteString(" }\n")
	}
	for _, n := range g.Nodes {
		c := colourOf(n.State)
		name := n.Name
		if n.ReadinessGate {
			name += " (gate)"
		}
		extra := ""
		if n.ReadinessGate {
			extra = ", peripheries=2"
		}
		fmt.Fprintf(&b, "  %s [label=%s, fillcolor=%s, color=%s%s];\n", dotQuote(n.Name), dotQuote(name+"\n"+caption(n)), dotQuote(c[0]), dotQuote(c[1]), extra)
	}
	for _, e := range g.Edges {
		fmt.Fprintf(&b, "  %s -> %s;\n", dotQuote(e.From), dotQuote(e.To))
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// dotQuote is a dot string literal ("\n" stays a line break).
func dotQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

// Mermaid writes the graph as a Mermaid flowchart, left to right, a class per state.
func Mermaid(w io.Writer, g *Graph) error {
	var b strings.Builder
	fmt.Fprintf(&b, "---\ntitle: \"%s\"\n---\nflowchart LR\n", mermaidText(summary(g)))
	id := map[string]string{}
	for i, n := range g.Nodes {
		id[n.Name] = "n" + strconv.Itoa(i)
	}
	used := map[string]bool{}
	for _, n := range g.Nodes {
		name := n.Name
		if n.ReadinessGate {
			name += " (gate)"
		}
		class := className(n.State)
		used[n.State] = true
		fmt.Fprintf(&b, "  %s[\"%s<br/>%s\"]:::%s\n", id[n.Name], mermaidText(name), mermaidText(caption(n)), class)
	}
	for _, e := range g.Edges {
		fmt.Fprintf(&b, "  %s --> %s\n", id[e.From], id[e.To])
	}
	for _, s := range []string{string(v1alpha1.StepSucceeded), string(v1alpha1.StepInProgress), string(v1alpha1.StepPending),
		string(v1alpha1.StepAwaitingApproval), string(v1alpha1.StepFailed), string(v1alpha1.StepBlocked), StateUnchanged} {
		if !used[s] {
			continue
		}
		c := colourOf(s)
		fmt.Fprintf(&b, "  classDef %s fill:%s,stroke:%s,color:#212121\n", className(s), c[0], c[1])
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func className(state string) string {
	var b strings.Builder
	b.WriteString("s")
	for _, r := range state {
		if (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// mermaidText escapes what Mermaid would read as syntax inside a quoted label.
func mermaidText(s string) string {
	r := strings.NewReplacer(`"`, "#quot;", "<", "#lt;", ">", "#gt;", "\n", " ")
	return r.Replace(s)
}
