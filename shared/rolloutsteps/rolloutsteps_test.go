package rolloutsteps

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
)

func chain(n int) []v1alpha1.Step {
	var out []v1alpha1.Step
	for i := 1; i <= n; i++ {
		s := v1alpha1.Step{Index: int32(i), Release: fmt.Sprintf("r%d", i), Action: v1alpha1.ActionInstall, State: v1alpha1.StepPending}
		if i > 1 {
			s.DependsOn = []string{fmt.Sprintf("r%d", i-1)}
		}
		out = append(out, s)
	}
	return out
}

func succeeded(s v1alpha1.Step) v1alpha1.Step {
	t := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, int(s.Index), 0, time.UTC))
	s.State, s.StartedAt, s.FinishedAt = v1alpha1.StepSucceeded, &t, &t
	s.Verdict = &v1alpha1.Verdict{Ready: true, ResourceVersion: fmt.Sprint(100 + s.Index),
		Fences: []v1alpha1.Fence{{Name: v1alpha1.FenceHealthy, State: v1alpha1.FencePassed}}}
	return s
}

func rollout() *v1alpha1.RuntimeRollout {
	return &v1alpha1.RuntimeRollout{ObjectMeta: metav1.ObjectMeta{Name: "r-aaa-bbb", UID: types.UID("0123456789abcdef")}}
}

func TestNames(t *testing.T) {
	defs := DefinitionsName(rollout())
	if defs != "r-aaa-bbb-steps-01234567" {
		t.Fatalf("DefinitionsName = %q", defs)
	}
	if got := BatchName(defs, 3); got != defs+"-3" {
		t.Fatalf("BatchName = %q", got)
	}
}

func TestSplit(t *testing.T) {
	steps := chain(6)
	defs := Index(chain(6))
	steps[0], steps[1], steps[2] = succeeded(steps[0]), succeeded(steps[1]), succeeded(steps[2])
	steps[3].State = v1alpha1.StepInProgress
	steps[5].Message = "waits for r5"
	recorded := Index([]v1alpha1.Step{succeeded(chain(1)[0])})
	changed := succeeded(chain(2)[1])
	changed.Message = "edited after the batch"
	recorded[2] = succeeded(chain(2)[1])
	steps[1] = changed

	keep, finished := Split(steps, defs, recorded)
	var kept, fin []int32
	for _, s := range keep {
		kept = append(kept, s.Index)
	}
	for _, s := range finished {
		fin = append(fin, s.Index)
	}
	// 1 is recorded unchanged, 5 is its definition: both left out. 2 differs from its record,
	// so it stays, but it is no candidate for a batch: one already holds it.
	if fmt.Sprint(kept) != "[2 3 4 6]" || fmt.Sprint(fin) != "[3]" {
		t.Fatalf("kept %v, finished %v; want [2 3 4 6] and [3]", kept, fin)
	}
}

func TestMergeLaterLayerWins(t *testing.T) {
	defs := chain(4)
	batch := []v1alpha1.Step{succeeded(defs[0]), succeeded(defs[1])}
	status := []v1alpha1.Step{defs[2]}
	status[0].State = v1alpha1.StepInProgress
	got := Merge(defs, batch, status)
	var states []string
	for _, s := range got {
		states = append(states, fmt.Sprintf("%d:%s", s.Index, s.State))
	}
	if strings.Join(states, " ") != "1:Succeeded 2:Succeeded 3:InProgress 4:Pending" {
		t.Fatalf("Merge = %v", states)
	}
	got[0].DependsOn = append(got[0].DependsOn, "x")
	if len(batch[0].DependsOn) != 0 {
		t.Fatal("Merge shares the steps' slices with its input")
	}
}

// store is ConfigMaps by name.
type store map[string]*corev1.ConfigMap

func (s store) get(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	cm, ok := s[ns+"/"+name]
	if !ok {
		return nil, fmt.Errorf("configmaps %q not found", name)
	}
	return cm, nil
}

func (s store) put(t *testing.T, r *v1alpha1.RuntimeRollout, name string, steps []v1alpha1.Step) {
	t.Helper()
	cm, err := ConfigMap(r, "aicr-system", name, steps)
	if err != nil {
		t.Fatal(err)
	}
	if cm.Immutable == nil || !*cm.Immutable || cm.OwnerReferences[0].UID != r.UID || cm.Labels[v1alpha1.LabelRole] != v1alpha1.StepsRoleValue {
		t.Fatalf("ConfigMap %s: not immutable, owned by the rollout and labelled: %+v", name, cm.ObjectMeta)
	}
	s["aicr-system/"+name] = cm
}

func TestExpand(t *testing.T) {
	r := rollout()
	all := chain(5)
	cms := store{}
	defs := DefinitionsName(r)
	cms.put(t, r, defs, chain(5))
	cms.put(t, r, BatchName(defs, 1), []v1alpha1.Step{succeeded(all[0]), succeeded(all[1])})
	cms.put(t, r, BatchName(defs, 2), []v1alpha1.Step{succeeded(all[2])})
	inflight := all[3]
	inflight.State = v1alpha1.StepInProgress
	r.Status.Steps = []v1alpha1.Step{inflight}
	r.Status.StepRecords = &v1alpha1.StepRecords{Namespace: "aicr-system", Definitions: defs, FinishedBatches: 2}

	got, err := Expand(context.Background(), r, cms.get)
	if err != nil {
		t.Fatal(err)
	}
	want := []v1alpha1.Step{succeeded(all[0]), succeeded(all[1]), succeeded(all[2]), inflight, all[4]}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Fatalf("Expand:\n got %+v\nwant %+v", got, want)
	}
	if c := Count(got); c.Total != 5 || c.Succeeded != 3 || c.InProgress != 1 || c.Pending != 1 {
		t.Fatalf("Count = %+v", c)
	}

	// Without records the status holds every step.
	plain := rollout()
	plain.Status.Steps = all
	if got, err := Expand(context.Background(), plain, nil); err != nil || len(got) != 5 {
		t.Fatalf("Expand without records = %d steps, %v", len(got), err)
	}
}

func TestExpandErrors(t *testing.T) {
	r := rollout()
	defs := DefinitionsName(r)
	other := rollout()
	other.UID = "ffffffff-other"
	for _, tc := range []struct {
		name  string
		setup func(store)
		want  string
	}{
		{"definitions missing", func(store) {}, "read its steps ConfigMap aicr-system/" + defs},
		{"a batch missing", func(s store) { s.put(t, r, defs, chain(2)) }, "read its steps ConfigMap aicr-system/" + BatchName(defs, 1)},
		{"another rollout's ConfigMap", func(s store) { s.put(t, other, defs, chain(2)) }, "does not belong to rollout r-aaa-bbb"},
		{"not JSON", func(s store) {
			s.put(t, r, defs, chain(2))
			s["aicr-system/"+defs].Data[v1alpha1.StepsDataKey] = "{"
		}, "key steps.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cms := store{}
			tc.setup(cms)
			r.Status.StepRecords = &v1alpha1.StepRecords{Namespace: "aicr-system", Definitions: defs, FinishedBatches: 1}
			_, err := Expand(context.Background(), r, cms.get)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Expand error = %v; want one containing %q", err, tc.want)
			}
		})
	}
}

// TestStepEqualSeesEveryField changes each field of a step and of its verdict in turn: StepEqual
// must tell it apart, as equality.Semantic.DeepEqual does. A field added to Step or Verdict
// fails here until StepEqual compares it.
func TestStepEqualSeesEveryField(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	base := func() v1alpha1.Step {
		return v1alpha1.Step{Index: 1, Release: "a", Action: v1alpha1.ActionInstall, DependsOn: []string{"z"}, State: v1alpha1.StepPending,
			StartedAt: &at, FinishedAt: &at, Verdict: &v1alpha1.Verdict{ObservedAt: &at, Fences: []v1alpha1.Fence{{Name: "f"}}}}
	}
	set := func(v reflect.Value) {
		switch v.Kind() {
		case reflect.String:
			v.SetString(v.String() + "x")
		case reflect.Int32:
			v.SetInt(v.Int() + 1)
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.Slice:
			v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
		case reflect.Pointer: // *metav1.Time
			later := metav1.NewTime(at.Add(time.Second))
			v.Set(reflect.ValueOf(&later))
		default:
			t.Fatalf("no change for a field of kind %s: extend the test", v.Kind())
		}
	}
	check := func(name string, a, b v1alpha1.Step) {
		t.Helper()
		if !equality.Semantic.DeepEqual(a, b) == StepEqual(&a, &b) {
			t.Errorf("%s: StepEqual %t, Semantic.DeepEqual %t", name, StepEqual(&a, &b), equality.Semantic.DeepEqual(a, b))
		}
	}
	st := reflect.TypeOf(v1alpha1.Step{})
	for i := range st.NumField() {
		a, b := base(), base()
		f := st.Field(i)
		if f.Name == "Verdict" {
			b.Verdict = nil
		} else {
			set(reflect.ValueOf(&b).Elem().Field(i))
		}
		check("Step."+f.Name, a, b)
	}
	vt := reflect.TypeOf(v1alpha1.Verdict{})
	for i := range vt.NumField() {
		a, b := base(), base()
		set(reflect.ValueOf(b.Verdict).Elem().Field(i))
		check("Verdict."+vt.Field(i).Name, a, b)
	}
	// Equal in both: nil and empty lists, the same instant in another location.
	a, b := base(), base()
	a.DependsOn, b.DependsOn = nil, []string{}
	local := metav1.NewTime(at.In(time.FixedZone("x", 3600)))
	b.StartedAt = &local
	check("nil and empty, another location", a, b)
	if !StepEqual(&a, &b) {
		t.Error("StepEqual tells apart a nil and an empty list, or one instant in two locations")
	}
}
