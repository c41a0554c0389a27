//go:build ignore

// vulnfindings reads the JSON of govulncheck runs (-format json, one or more concatenated) on
// stdin and fails when the code calls a vulnerable function that hack/vulns-accepted.txt (the
// first argument) does not list, or when that file lists one no run found any more (so the list
// only ever holds what is still true). hack/verify.sh runs it:
//
//	govulncheck -db file://... -format json ./... | go run hack/vulnfindings.go hack/vulns-accepted.txt
//
// Each line of the file is an OSV ID, then why it is accepted; # starts a comment. Findings in
// imported packages or required modules whose vulnerable functions the code never calls are not
// reported (govulncheck's own default).
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

type frame struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Package  string `json:"package"`
	Function string `json:"function"`
	Receiver string `json:"receiver"`
	Position *struct {
		Filename string `json:"filename"`
		Line     int    `json:"line"`
	} `json:"position"`
}

type message struct {
	OSV *struct {
		ID      string `json:"id"`
		Summary string `json:"summary"`
	} `json:"osv"`
	Finding *struct {
		OSV          string  `json:"osv"`
		FixedVersion string  `json:"fixed_version"`
		Trace        []frame `json:"trace"`
	} `json:"finding"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run hack/vulnfindings.go ACCEPTED-FILE < govulncheck.json")
		os.Exit(2)
	}
	accepted, err := readAccepted(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "vulnfindings:", err)
		os.Exit(2)
	}
	summaries := map[string]string{}
	type called struct{ id, module, version, fixed, where string }
	found := map[string]called{}
	dec := json.NewDecoder(os.Stdin)
	for {
		var m message
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			fmt.Fprintln(os.Stderr, "vulnfindings: read govulncheck's JSON:", err)
			os.Exit(2)
		}
		if m.OSV != nil {
			summaries[m.OSV.ID] = m.OSV.Summary
		}
		f := m.Finding
		// a finding is in called code when its trace starts at a function (govulncheck also
		// reports vulnerable packages imported and modules required, without a function)
		if f == nil || len(f.Trace) == 0 || f.Trace[0].Function == "" {
			continue
		}
		top, caller := f.Trace[0], f.Trace[len(f.Trace)-1]
		where := caller.Package + "." + caller.Function
		if caller.Position != nil {
			where = fmt.Sprintf("%s:%d", caller.Position.Filename, caller.Position.Line)
		}
		if _, seen := found[f.OSV]; !seen {
			found[f.OSV] = called{id: f.OSV, module: top.Module, version: top.Version, fixed: f.FixedVersion, where: where}
		}
	}
	ids := make([]string, 0, len(found))
	for id := range found {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	failed := 0
	for _, id := range ids {
		c := found[id]
		line := fmt.Sprintf("%s in %s@%s (fixed in %s), called from %s: %s", c.id, c.module, c.version, orNone(c.fixed), c.where, summaries[c.id])
		if why, ok := accepted[id]; ok {
			fmt.Printf("accepted (%s): %s\n", why, line)
			continue
		}
		fmt.Printf("VULNERABLE: %s\n", line)
		failed++
	}
	var stale []string
	for id := range accepted {
		if _, ok := found[id]; !ok {
			stale = append(stale, id)
		}
	}
	sort.Strings(stale)
	for _, id := range stale {
		fmt.Printf("STALE: %s is accepted in %s but no longer found: remove its line\n", id, os.Args[1])
		failed++
	}
	if failed > 0 {
		fmt.Printf("%d findings to act on: raise the module (go get MODULE@FIXED, make tidy) or the Go toolchain, or, for what cannot be fixed here, list the ID with the reason in %s\n", failed, os.Args[1])
		os.Exit(1)
	}
}

// readAccepted reads the accepted IDs and their reasons.
func readAccepted(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for i, l := range strings.Split(string(data), "\n") {
		if j := strings.Index(l, "#"); j >= 0 {
			l = l[:j]
		}
		id, why, _ := strings.Cut(strings.TrimSpace(l), " ")
		if id == "" {
			continue
		}
		if !strings.HasPrefix(id, "GO-") || strings.TrimSpace(why) == "" {
			return nil, fmt.Errorf("%s:%d: want an OSV ID (GO-YYYY-NNNN) and the reason it is accepted", path, i+1)
		}
		out[id] = strings.TrimSpace(why)
	}
	return out, nil
}

func orNone(s string) string {
	if s == "" {
		return "no release"
	}
	return s
}
