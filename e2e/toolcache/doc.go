// Package toolcache holds the tests of hack/tools.sh, the script that builds the tools the stack
// and the test tiers run into a cache outside the repository. The tests run the script with fake
// tool builds (AICR_TOOLS_RECIPES) in a temporary cache and check what it prints: one progress
// line updated in place on a terminal, plain lines otherwise, the builds' own output only in the
// log. It has no code of its own.
package toolcache
