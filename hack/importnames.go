//go:build ignore

// importnames fails when the Go files named on stdin (one path a line) import one package under
// two names, give one alias to two packages, or import a package that has a fixed alias under
// another name. hack/verify.sh runs it over the tracked Go files:
//
//	git ls-files '*.go' | go run hack/importnames.go
//
// An alias equal to the package's path name (v1alpha1 for .../api/v1alpha1) counts as no alias.
// Generated files (a "Code generated ... DO NOT EDIT." line) are skipped: their imports are the
// generator's.
package main

import (
	"bufio"
	"fmt"
	"go/parser"
	gotoken "go/token"
	"os"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// fixed are the aliases every file uses for these packages.
var fixed = map[string]string{
	"k8s.io/apimachinery/pkg/api/errors":   "apierrors",
	"k8s.io/apimachinery/pkg/apis/meta/v1": "metav1",
	"k8s.io/api/core/v1":                   "corev1",
}

var (
	generated    = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)
	majorVersion = regexp.MustCompile(`^v[0-9]+$`)
)

// pathName is the name an import path's package is known by when not aliased, as far as the
// path says: its last element, or the one before a major-version suffix.
func pathName(p string) string {
	name := path.Base(p)
	if majorVersion.MatchString(name) && strings.Contains(p, "/") {
		name = path.Base(path.Dir(p))
	}
	return name
}

func main() {
	names := map[string]map[string][]string{} // import path -> local name -> files
	aliases := map[string]map[string]bool{}   // explicit alias -> import paths
	var problems []string
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		file := strings.TrimSpace(in.Text())
		if file == "" {
			continue
		}
		src, err := os.ReadFile(file)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if generated.Match(src) {
			continue
		}
		f, err := parser.ParseFile(gotoken.NewFileSet(), file, src, parser.ImportsOnly)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			name := "(no alias)"
			if im.Name != nil {
				if im.Name.Name == "_" || im.Name.Name == "." {
					continue
				}
				if im.Name.Name != pathName(p) {
					name = im.Name.Name
					if aliases[name] == nil {
						aliases[name] = map[string]bool{}
					}
					aliases[name][p] = true
				}
			}
			if want, ok := fixed[p]; ok && name != want {
				problems = append(problems, fmt.Sprintf("%s imports %s as %s; it is always %s", file, p, name, want))
			}
			if names[p] == nil {
				names[p] = map[string][]string{}
			}
			names[p][name] = append(names[p][name], file)
		}
	}
	for p, byName := range names {
		if len(byName) < 2 {
			continue
		}
		var uses []string
		for name, files := range byName {
			if len(files) > 3 {
				uses = append(uses, fmt.Sprintf("%s in %d files", name, len(files)))
			} else {
				uses = append(uses, fmt.Sprintf("%s in %s", name, strings.Join(files, ", ")))
			}
		}
		sort.Strings(uses)
		problems = append(problems, fmt.Sprintf("%s is imported under %d names: %s", p, len(byName), strings.Join(uses, "; ")))
	}
	for alias, paths := range aliases {
		if len(paths) < 2 {
			continue
		}
		var ps []string
		for p := range paths {
			ps = append(ps, p)
		}
		sort.Strings(ps)
		problems = append(problems, fmt.Sprintf("alias %s names %d packages: %s", alias, len(ps), strings.Join(ps, ", ")))
	}
	sort.Strings(problems)
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
}
