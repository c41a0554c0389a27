package controller

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v1alpha1 "github.com/aicr-run/aicr-operator/shared/api/v1alpha1"
	"github.com/aicr-run/aicr-operator/shared/rolloutsteps"
)

// maxRecords bounds the decoded step ConfigMaps stepStore keeps; past it they are read again.
const maxRecords = 512

// stepStore keeps a rollout's finished and untouched steps out of the object written at every
// step (shared/rolloutsteps). The decisions see every step in Status.Steps: rollouts are
// expanded as they are read, and compacted as their status is written. The ConfigMaps it
// writes are immutable and each is created before the status write that relies on it, so a
// crash between the two leaves a ConfigMap the next write finds (AlreadyExists) and adopts.
type stepStore struct {
	Store
	namespace string

	mu      sync.Mutex
	records map[string][]v1alpha1.Step // rollout UID/ConfigMap name -> its steps
}

func newStepStore(inner Store, namespace string) *stepStore {
	return &stepStore{Store: inner, namespace: namespace, records: map[string][]v1alpha1.Step{}}
}

// GetRollout implements Store.
func (s *stepStore) GetRollout(ctx context.Context, name string) (*v1alpha1.RuntimeRollout, error) {
	r, err := s.Store.GetRollout(ctx, name)
	if err != nil {
		return nil, err
	}
	return s.expand(ctx, r)
}

// ListRollouts implements Store.
func (s *stepStore) ListRollouts(ctx context.Context, runtime string) ([]v1alpha1.RuntimeRollout, error) {
	list, err := s.Store.ListRollouts(ctx, runtime)
	if err != nil {
		return nil, err
	}
	for i := range list {
		r, err := s.expand(ctx, &list[i])
		if err != nil {
			return nil, err
		}
		list[i] = *r
	}
	return list, nil
}

// CreateRollout implements Store.
func (s *stepStore) CreateRollout(ctx context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error) {
	out, err := s.Store.CreateRollout(ctx, r)
	if err != nil {
		return nil, err
	}
	return s.expand(ctx, out)
}

// UpdateRollout implements Store. The API server keeps the stored status on this write (the
// status subresource), so the steps are not sent.
func (s *stepStore) UpdateRollout(ctx context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error) {
	in := r.DeepCopy()
	in.Status = v1alpha1.RuntimeRolloutStatus{}
	out, err := s.Store.UpdateRollout(ctx, in)
	if err != nil {
		return nil, err
	}
	return s.expand(ctx, out)
}

// UpdateRolloutStatus implements Store: it writes the step ConfigMaps the status needs first.
func (s *stepStore) UpdateRolloutStatus(ctx context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error) {
	in, err := s.compact(ctx, r)
	if err != nil {
		return nil, err
	}
	out, err := s.Store.UpdateRolloutStatus(ctx, in)
	if err != nil {
		return nil, err
	}
	return s.expand(ctx, out)
}

func (s *stepStore) expand(ctx context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error) {
	if r.Status.StepRecords == nil {
		return r, nil
	}
	rec := r.Status.StepRecords
	defs, err := s.read(ctx, r, rec.Namespace, rec.Definitions)
	if err != nil {
		return nil, err
	}
	layers := [][]v1alpha1.Step{defs}
	for n := int32(1); n <= rec.FinishedBatches; n++ {
		batch, err := s.read(ctx, r, rec.Namespace, rolloutsteps.BatchName(rec.Definitions, n))
		if err != nil {
			return nil, err
		}
		layers = append(layers, batch)
	}
	r.Status.Steps = rolloutsteps.Merge(append(layers, r.Status.Steps)...)
	return r, nil
}

// compact returns a copy of r whose status lists only the steps no ConfigMap holds, creating
// the definitions ConfigMap on the rollout's first write of steps and a batch once
// rolloutsteps.BatchSize finished steps have gathered.
func (s *stepStore) compact(ctx context.Context, r *v1alpha1.RuntimeRollout) (*v1alpha1.RuntimeRollout, error) {
	steps := r.Status.Steps
	// A copy of everything but the steps, which Split below copies as it keeps them.
	shallow := *r
	shallow.Status.Steps = nil
	out := shallow.DeepCopy()
	rec := out.Status.StepRecords
	if rec == nil {
		if len(steps) == 0 {
			out.Status.Steps = steps
			return out, nil
		}
		defs := make([]v1alpha1.Step, len(steps))
		for i := range steps {
			defs[i] = rolloutsteps.Definition(steps[i])
		}
		rec = &v1alpha1.StepRecords{Namespace: s.namespace, Definitions: rolloutsteps.DefinitionsName(r)}
		if err := s.create(ctx, r, rec.Definitions, defs); err != nil {
			return nil, err
		}
		// Definitions found already there were written by an attempt of this first write that
		// crashed before the status; nothing started since, and they are the rollout's steps.
		stored, err := s.read(ctx, r, rec.Namespace, rec.Definitions)
		if err != nil {
			return nil, err
		}
		if !rolloutsteps.StepsEqual(stored, defs) {
			if !rolloutsteps.StepsEqual(steps, defs) {
				return nil, fmt.Errorf("rollout %s: steps ConfigMap %s/%s holds other steps than the rollout's first write", r.Name, rec.Namespace, rec.Definitions)
			}
			steps = rolloutsteps.Merge(stored)
		}
		out.Status.StepRecords = rec
	}
	defs, err := s.read(ctx, r, rec.Namespace, rec.Definitions)
	if err != nil {
		return nil, err
	}
	recorded := map[int32]v1alpha1.Step{}
	for n := int32(1); n <= rec.FinishedBatches; n++ {
		batch, err := s.read(ctx, r, rec.Namespace, rolloutsteps.BatchName(rec.Definitions, n))
		if err != nil {
			return nil, err
		}
		for _, st := range batch {
			recorded[st.Index] = st
		}
	}
	byDef := rolloutsteps.Index(defs)
	keep, finished := rolloutsteps.Split(steps, byDef, recorded)
	for len(finished) >= rolloutsteps.BatchSize {
		name := rolloutsteps.BatchName(rec.Definitions, rec.FinishedBatches+1)
		if err := s.create(ctx, r, name, finished); err != nil {
			return nil, err
		}
		// A batch found already there (written before a crash) may hold other steps: what it
		// holds is recorded, whatever this write would have put in it.
		batch, err := s.read(ctx, r, rec.Namespace, name)
		if err != nil {
			return nil, err
		}
		for _, st := range batch {
			recorded[st.Index] = st
		}
		rec.FinishedBatches++
		keep, finished = rolloutsteps.Split(steps, byDef, recorded)
	}
	out.Status.Steps = keep
	out.Status.StepCounts = rolloutsteps.Count(steps)
	return out, nil
}

// create writes one immutable steps ConfigMap; one already there is fine (an earlier attempt
// of this write), and what it holds counts.
func (s *stepStore) create(ctx context.Context, r *v1alpha1.RuntimeRollout, name string, steps []v1alpha1.Step) error {
	cm, err := rolloutsteps.ConfigMap(r, s.namespace, name, steps)
	if err != nil {
		return err
	}
	switch err := s.CreateConfigMap(ctx, cm); {
	case err == nil:
		s.remember(recordKey(r, name), steps)
		return nil
	case apierrors.IsAlreadyExists(err):
		return nil
	default:
		return fmt.Errorf("rollout %s: create steps ConfigMap %s/%s: %w", r.Name, s.namespace, name, err)
	}
}

// read returns the steps of one ConfigMap of r, decoded once.
func (s *stepStore) read(ctx context.Context, r *v1alpha1.RuntimeRollout, namespace, name string) ([]v1alpha1.Step, error) {
	key := recordKey(r, name)
	s.mu.Lock()
	steps, ok := s.records[key]
	s.mu.Unlock()
	if ok {
		return steps, nil
	}
	cm, err := s.GetConfigMap(ctx, namespace, name)
	if err != nil {
		return nil, fmt.Errorf("rollout %s: read steps ConfigMap %s/%s: %w", r.Name, namespace, name, err)
	}
	if steps, err = rolloutsteps.Decode(cm, r); err != nil {
		return nil, fmt.Errorf("rollout %s: %w", r.Name, err)
	}
	s.remember(key, steps)
	return steps, nil
}

func recordKey(r *v1alpha1.RuntimeRollout, name string) string { return string(r.UID) + "/" + name }

func (s *stepStore) remember(key string, steps []v1alpha1.Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.records) >= maxRecords {
		clear(s.records)
	}
	s.records[key] = steps
}
