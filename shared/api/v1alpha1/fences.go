package v1alpha1

import "strings"

// FenceNotJudged begins the message of a fence readiness did not judge because an earlier fence
// is not passed: the Application's spec is not the plan's (the guard, whose message each such
// fence repeats after "not judged: "), or ComparedToSpec has not passed yet. The fence that is
// not passed is the cause; these are its consequences.
const FenceNotJudged = "not judged"

// FenceJudged says whether readiness judged f: false for a fence whose message begins with
// FenceNotJudged. A summary names such fences without their messages and says the cause once.
func FenceJudged(f Fence) bool { return !strings.HasPrefix(f.Message, FenceNotJudged) }
