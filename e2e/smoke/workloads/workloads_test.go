//go:build integration

package workloads_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/aicr-run/aicr-operator/testkit/testenv"
)

// Named timeouts; kwok turns pods Ready within seconds, the rest is controller latency on a
// loaded machine.
const (
	deploymentAvailableTimeout = 2 * time.Minute
	jobCompleteTimeout         = 2 * time.Minute
	podScheduledTimeout        = time.Minute
	testTimeout                = 5 * time.Minute
)

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, testenv.Options{Kwok: true, SkipArgoCRDs: true}))
}

func setup(t *testing.T, ns string) (context.Context, kubernetes.Interface) {
	t.Helper()
	env := testenv.Current(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	cs := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// the ServiceAccount admission plugin rejects pods until the namespace's default SA exists
	err := testenv.WaitFor(ctx, podScheduledTimeout, "serviceaccount "+ns+"/default", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, cs
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				// kwok never pulls or runs the image
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.invalid/web:1.0.0"}}},
			},
		},
	}
}

// waitAvailable waits until the Deployment reports every replica available.
func waitAvailable(ctx context.Context, cs kubernetes.Interface, ns, name string, replicas int32) error {
	return testenv.WaitFor(ctx, deploymentAvailableTimeout, "deployment "+ns+"/"+name+" available", func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue && d.Status.AvailableReplicas == replicas {
				return true, nil
			}
		}
		return false, fmt.Errorf("%d/%d replicas available", d.Status.AvailableReplicas, replicas)
	})
}

// A Deployment becomes Available: controller-manager makes the pods, the scheduler places them on
// kwok's node, kwok marks them Running and Ready.
func TestDeploymentBecomesAvailable(t *testing.T) {
	ctx, cs := setup(t, "web")
	if _, err := cs.AppsV1().Deployments("web").Create(ctx, deployment("web", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := waitAvailable(ctx, cs, "web", "web", 3); err != nil {
		t.Fatal(err)
	}
}

// A Job's pod is completed by kwok and the Job turns Complete.
func TestJobCompletes(t *testing.T) {
	ctx, cs := setup(t, "jobs")
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "once"},
		Spec: batchv1.JobSpec{
			BackoffLimit: new(int32),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "once", Image: "registry.invalid/once:1.0.0", Command: []string{"/bin/true"}}},
			}},
		},
	}
	if _, err := cs.BatchV1().Jobs("jobs").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := testenv.WaitFor(ctx, jobCompleteTimeout, "job jobs/once complete", func(ctx context.Context) (bool, error) {
		j, err := cs.BatchV1().Jobs("jobs").Get(ctx, "once", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, fmt.Errorf("succeeded %d, failed %d", j.Status.Succeeded, j.Status.Failed)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// With kwok stopped, pods are scheduled but never start, so a rollout stays in progress; once
// kwok is back the Deployment becomes Available. This is how tests hold an Application in
// Progressing.
func TestRolloutWaitsForKwok(t *testing.T) {
	ctx, cs := setup(t, "paused")
	env := testenv.Current(t)
	start := time.Now()
	if err := env.StopProcess(testenv.ProcKwok); err != nil {
		t.Fatal(err)
	}
	t.Logf("kwok stopped in %s", time.Since(start).Round(100*time.Millisecond))
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			if err := env.StartProcess(context.Background(), testenv.ProcKwok); err != nil {
				t.Errorf("restart kwok: %v", err)
			}
		}
	})
	if _, err := cs.AppsV1().Deployments("paused").Create(ctx, deployment("web", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	err := testenv.WaitFor(ctx, podScheduledTimeout, "pod of paused/web scheduled", func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods("paused").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil || len(pods.Items) == 0 || pods.Items[0].Spec.NodeName == "" {
			return false, err
		}
		pod = pods.Items[0]
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// scheduled onto the fake node, and nobody but kwok could have started it
	if pod.Spec.NodeName != env.NodeName || pod.Status.Phase != corev1.PodPending {
		t.Fatalf("pod %s on %q in phase %s, want Pending on %s", pod.Name, pod.Spec.NodeName, pod.Status.Phase, env.NodeName)
	}

	start = time.Now()
	if err := env.StartProcess(ctx, testenv.ProcKwok); err != nil {
		t.Fatal(err)
	}
	restarted = true
	t.Logf("kwok back in %s", time.Since(start).Round(100*time.Millisecond))
	if err := waitAvailable(ctx, cs, "paused", "web", 1); err != nil {
		t.Fatal(err)
	}
	t.Logf("deployment available %s after kwok was started again", time.Since(start).Round(100*time.Millisecond))
}
