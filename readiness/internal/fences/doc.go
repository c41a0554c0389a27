// Package fences judges whether an Argo CD Application is ready at the current revision: a pure
// function from one observation of the Application (spec, annotations, status, operation) to a
// verdict that names every fence and its state.
//
// The rules are those real Argo CD v3.4.2 was recorded following (see testdata/README.md, a
// copy of the fixtures' README): the status is trusted only once status.sync.comparedTo equals
// the spec; a sync counts only when it finished for this spec (operation absent, phase
// Succeeded, syncResult revision and source equal to the spec); health never counts alone;
// metadata.generation and the one-second timestamps decide nothing. The step protocol
// (operator.aicr.run/step, step-write, refresh-for, readiness-gate) is docs/contracts.md, "A
// step, end to end", item 3.
package fences
