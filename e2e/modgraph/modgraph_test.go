package modgraph

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite docs/modules.dot from the workspace's imports")

const modulePrefix = "github.com/aicr-run/aicr-operator/"

// tags are every build tag a test file of the workspace carries, so test-only imports of the
// integration, e2e, bench, benchargocd and chaos tiers count too.
const tags = "integration,e2e,bench,benchargocd,chaos"

// roles says what belongs in each module; the picture shows it under the module's name. A
// module without a role fails the test: say what it is for before adding it.
var roles = map[string]string{
	"shared":        "contracts",
	"servicekit":    "service runtime",
	"testkit":       "test harnesses",
	"planner":       "binary",
	"applier":       "binary",
	"readiness":     "binary",
	"credrefresher": "binary",
	"admission":     "binary",
	"setup":         "the chart's setup Job",
	"cli":           "the kubectl plugin",
	"e2e":           "cross-service tests, the demo",
}

// listed are the modules whose packages the picture names (the others' are internal/).
var listed = []string{"shared", "servicekit", "testkit"}

// heavy are the outside modules the module walls are about (hack/verify.sh): the graph shows
// which workspace modules import them directly.
var heavy = map[string]string{
	"github.com/argoproj/argo-cd/v3":    "argo-cd",
	"github.com/nats-io/nats-server/v2": "nats-server",
}

// fill colours the kinds of node.
var fill = map[string]string{
	"contracts": "#dbeafe", "runtime": "#dcfce7", "harness": "#fef9c3", "binary": "#ffffff",
	"tests": "#f3e8ff", "outside": "#fee2e2",
}

func kind(name string) string {
	switch {
	case name == "shared":
		return "contracts"
	case name == "servicekit":
		return "runtime"
	case name == "testkit":
		return "harness"
	case name == "e2e":
		return "tests"
	case slices.Contains(sortedValues(heavy), name):
		return "outside"
	}
	return "binary"
}

func sortedValues(m map[string]string) []string {
	var v []string
	for _, s := range m {
		v = append(v, s)
	}
	sort.Strings(v)
	return v
}

// edge is "from imports to": test says only tests of from do.
type edge struct {
	from, to string
	test     bool
}

type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// moduleOf maps an import path to its node: a workspace module, a heavy outside module, or "".
func moduleOf(path string, modules []string) string {
	if rest, ok := strings.CutPrefix(path, modulePrefix); ok {
		for _, m := range modules {
			if rest == m || strings.HasPrefix(rest, m+"/") {
				return m
			}
		}
		return ""
	}
	for mod, name := range heavy {
		if path == mod || strings.HasPrefix(path, mod+"/") {
			return name
		}
	}
	return ""
}

// repoRoot is the folder of go.work. The graph is the workspace's: with the workspace off
// (GOWORK=off, one module alone) there is none to compare, and the test is skipped.
func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOWORK").Output()
	if err != nil {
		t.Fatalf("go env GOWORK: %v", err)
	}
	switch gowork := strings.TrimSpace(string(out)); gowork {
	case "", "off":
		t.Skip("the workspace is off (GOWORK=off or no go.work): the module graph is the workspace's")
		return ""
	default:
		return filepath.Dir(gowork)
	}
}

// graph derives the module graph from go list: the workspace modules, and an edge for every
// module whose packages (solid) or only whose tests (dashed) import another's; and for the
// listed modules, their top-level packages.
func graph(t *testing.T, root string) (modules []string, edges []edge, packages map[string][]string) {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Path}}")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	for _, line := range strings.Fields(string(out)) {
		name, ok := strings.CutPrefix(line, modulePrefix)
		if !ok {
			t.Fatalf("workspace module %s is not under %s", line, modulePrefix)
		}
		modules = append(modules, name)
	}
	sort.Strings(modules)
	cmd = exec.Command("go", "list", "-tags", tags, "-json=ImportPath,Imports,TestImports,XTestImports", modulePrefix+"...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	found := map[edge]bool{}
	packages = map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		from := moduleOf(p.ImportPath, modules)
		if slices.Contains(listed, from) {
			top, _, _ := strings.Cut(strings.TrimPrefix(p.ImportPath, modulePrefix+from+"/"), "/")
			if !slices.Contains(packages[from], top) {
				packages[from] = append(packages[from], top)
			}
		}
		add := func(imports []string, test bool) {
			for _, imp := range imports {
				if to := moduleOf(imp, modules); to != "" && to != from {
					found[edge{from, to, test}] = true
				}
			}
		}
		add(p.Imports, false)
		add(p.TestImports, true)
		add(p.XTestImports, true)
	}
	for e := range found {
		if e.test && found[edge{e.from, e.to, false}] {
			continue // a package imports it: the test imports add nothing
		}
		edges = append(edges, e)
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].from != edges[j].from {
			return edges[i].from < edges[j].from
		}
		return edges[i].to < edges[j].to
	})
	for _, ps := range packages {
		sort.Strings(ps)
	}
	return modules, edges, packages
}

// dot writes the graph in Graphviz's language, deterministically.
func dot(t *testing.T, modules []string, edges []edge, packages map[string][]string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("// Generated by e2e/modgraph's TestModuleGraph from go list; make docs-images rewrites it.\n")
	b.WriteString("// An edge A -> B: a package of module A imports one of B (dashed: only A's tests do).\n")
	b.WriteString("digraph modules {\n")
	b.WriteString("\tgraph [fontname=\"Helvetica\", nodesep=0.3, ranksep=0.6];\n")
	b.WriteString("\tnode [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=11];\n")
	b.WriteString("\tedge [color=\"#475569\", arrowsize=0.7];\n")
	var nodes []string
	used := map[string]bool{}
	for _, e := range edges {
		used[e.from], used[e.to] = true, true
	}
	nodes = append(nodes, modules...)
	for _, name := range sortedValues(heavy) {
		if used[name] {
			nodes = append(nodes, name)
		}
	}
	for _, n := range nodes {
		label := n
		switch role, ok := roles[n]; {
		case ok:
			label += "\n" + role
			if ps := packages[n]; len(ps) > 0 {
				label += ":\n" + wrap(ps, 34)
			}
		case kind(n) == "outside":
			for mod, name := range heavy {
				if name == n {
					label += "\n" + mod
				}
			}
		default:
			t.Errorf("module %s has no role in roles: say what belongs in it (and in docs/architecture.md)", n)
		}
		fmt.Fprintf(&b, "\t%q [label=%q, fillcolor=%q];\n", n, label, fill[kind(n)])
	}
	// The binaries side by side.
	var binaries []string
	for _, n := range nodes {
		if kind(n) == "binary" {
			binaries = append(binaries, fmt.Sprintf("%q;", n))
		}
	}
	fmt.Fprintf(&b, "\t{ rank=same; %s }\n", strings.Join(binaries, " "))
	for _, e := range edges {
		if e.test {
			fmt.Fprintf(&b, "\t%q -> %q [style=dashed];\n", e.from, e.to)
		} else {
			fmt.Fprintf(&b, "\t%q -> %q;\n", e.from, e.to)
		}
	}
	b.WriteString("}\n")
	return b.String()
}

// wrap joins words with ", ", breaking the line before one would pass width characters.
func wrap(words []string, width int) string {
	var b strings.Builder
	line := 0
	for i, w := range words {
		if i > 0 {
			if line+2+len(w) > width {
				b.WriteString(",\n")
				line = 0
			} else {
				b.WriteString(", ")
				line += 2
			}
		}
		b.WriteString(w)
		line += len(w)
	}
	return b.String()
}

var (
	dotNode  = regexp.MustCompile(`(?m)^\t"([^"]+)" \[label=`)
	dotEdge  = regexp.MustCompile(`(?m)^\t"([^"]+)" -> "([^"]+)"`)
	svgTitle = regexp.MustCompile(`<title>([^<]*)</title>`)
)

// titles are the node and edge names of a graph as Graphviz titles them in SVG ("a" and "a->b").
func dotTitles(src string) []string {
	var titles []string
	for _, m := range dotNode.FindAllStringSubmatch(src, -1) {
		titles = append(titles, m[1])
	}
	for _, m := range dotEdge.FindAllStringSubmatch(src, -1) {
		titles = append(titles, m[1]+"->"+m[2])
	}
	sort.Strings(titles)
	return titles
}

func svgTitles(svg string) []string {
	var titles []string
	for _, m := range svgTitle.FindAllStringSubmatch(svg, -1) {
		if t := html.UnescapeString(m[1]); t != "modules" { // the graph's own title
			titles = append(titles, t)
		}
	}
	sort.Strings(titles)
	return titles
}

// TestModuleGraph fails when docs/modules.dot is not the graph the workspace's imports make, or
// when docs/modules.svg was not rendered from it: the picture in docs/architecture.md is then
// out of date. `make docs-images` rewrites both.
func TestModuleGraph(t *testing.T) {
	root := repoRoot(t)
	modules, edges, packages := graph(t, root)
	if len(modules) < 2 || len(edges) == 0 {
		t.Fatalf("go list found %d modules and %d edges; the workspace has more", len(modules), len(edges))
	}
	want := dot(t, modules, edges, packages)
	dotFile, svgFile := filepath.Join(root, "docs", "modules.dot"), filepath.Join(root, "docs", "modules.svg")
	if *update {
		if err := os.WriteFile(dotFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(dotFile)
	if err != nil {
		t.Fatalf("read the module graph: %v (run make docs-images)", err)
	}
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("docs/modules.dot is not the workspace's module graph; run make docs-images (-go list +docs/modules.dot):\n%s", diff)
	}
	svg, err := os.ReadFile(svgFile)
	if err != nil {
		t.Fatalf("read the rendered picture: %v (run make docs-images)", err)
	}
	if diff := cmp.Diff(dotTitles(string(got)), svgTitles(string(svg))); diff != "" {
		t.Errorf("docs/modules.svg was not rendered from docs/modules.dot; run make docs-images (-dot +svg):\n%s", diff)
	}
}
