package k8sdriver_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/jm/resourcemanager"
	"github.com/sluicehq/sluice/jm/resourcemanager/k8sdriver"
)

func TestMain(m *testing.M) {
	// client-go's fake watch and klog keep goroutines of their own.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"))
}

const template = `
apiVersion: v1
kind: Pod
metadata:
  labels:
    team: data
spec:
  serviceAccountName: sluice-tm
  containers:
  - name: taskmanager
    image: sluice:dev
    args: ["tm", "--blob", "s3://sluice/blobs", "--listen", "0.0.0.0:6122"]
  - name: sidecar
    image: busybox
`

func TestParsePodTemplate(t *testing.T) {
	tests := []struct {
		name, yaml, container, want string // want "" = valid
	}{
		{"valid", template, "", ""},
		{"named container", template, "sidecar", ""},
		{"not yaml", "{{{ nope", "", "pod template is not a Kubernetes object"},
		{"no kind", "apiVersion: v1\nspec: {}\n", "", "pod template is not a Kubernetes object"},
		{"not a pod", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "", "pod template is a ConfigMap, not a Pod"},
		{"no containers", "apiVersion: v1\nkind: Pod\nspec: {}\n", "", "pod template has no containers"},
		{"no such container", strings.ReplaceAll(template, "name: taskmanager", "name: tm"), "", `no container named "taskmanager"`},
		{"only container, any name", "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - {name: x, image: sluice:dev}\n", "", ""},
		{"no image", "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - {name: taskmanager}\n", "", `container "taskmanager" has no image`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := k8sdriver.ParsePodTemplate([]byte(tt.yaml), tt.container)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("err = %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("err = %v; want %q", err, tt.want)
			}
		})
	}
}

// setup returns a fake API server holding the JobManager's pod, and a
// driver over it.
func setup(t *testing.T, objs ...*corev1.Pod) (*fake.Clientset, *k8sdriver.Driver) {
	t.Helper()
	cs := fake.NewClientset()
	return cs, setupOn(t, cs, objs...)
}

// setupOn creates the JobManager's pod (and objs) on cs and returns a
// driver over it.
func setupOn(t *testing.T, cs kubernetes.Interface, objs ...*corev1.Pod) *k8sdriver.Driver {
	t.Helper()
	ctx := context.Background()
	jm := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sluice-jm-0", Namespace: "data", UID: types.UID("jm-uid")},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "jobmanager", Image: "sluice:dev"}}}}
	for _, p := range append([]*corev1.Pod{jm}, objs...) {
		if _, err := cs.CoreV1().Pods("data").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tpl, err := k8sdriver.ParsePodTemplate([]byte(template), "")
	if err != nil {
		t.Fatal(err)
	}
	d, err := k8sdriver.New(k8sdriver.Config{Client: cs, Namespace: "data", Template: tpl, OwnerPod: "sluice-jm-0", ClusterID: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func tmPods(t *testing.T, cs kubernetes.Interface) []corev1.Pod {
	t.Helper()
	l, err := cs.CoreV1().Pods("data").List(context.Background(), metav1.ListOptions{LabelSelector: k8sdriver.LabelCluster + "=prod"})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func newRM(t *testing.T, d resourcemanager.Driver, onLost func(resourcemanager.Lost)) *resourcemanager.ResourceManager {
	t.Helper()
	rm := resourcemanager.New(resourcemanager.Config{
		HeartbeatInterval: 10 * time.Millisecond, HeartbeatTimeout: time.Hour, SlotRequestTimeout: time.Minute,
		Driver: d, TaskManagerSpec: resourcemanager.ResourceSpec{Slots: 2, MemoryBytes: 1 << 30},
		MaxTaskManagers: 4, TaskManagerIdleTimeout: 100 * time.Millisecond, OnLost: onLost,
	})
	t.Cleanup(rm.Close)
	if err := rm.StartDriver(context.Background(), "sluice-jm:6123"); err != nil {
		t.Fatal(err)
	}
	return rm
}

func register(t *testing.T, rm *resourcemanager.ResourceManager, id string) {
	t.Helper()
	r := control.Registration{ResourceID: id, RPCAddress: "10.0.0.7:6122", DataAddress: "10.0.0.7:6121", Slots: 2}
	if _, err := rm.RegisterTaskManager(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}

func waitPods(t *testing.T, cs kubernetes.Interface, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if pods = tmPods(t, cs); len(pods) != n {
			return fmt.Errorf("%d task manager pods, want %d", len(pods), n)
		}
		return nil
	})
	return pods
}

func TestPodsFollowTheTemplateAndADeletedOneIsReplaced(t *testing.T) {
	cs, d := setup(t)
	podsFollowTheTemplate(t, cs, d)
}

// podsFollowTheTemplate checks the pods d makes on cs, and that a deleted
// one is replaced, before and after its TaskManager registered.
func podsFollowTheTemplate(t *testing.T, cs kubernetes.Interface, d *k8sdriver.Driver) {
	jm, err := cs.CoreV1().Pods("data").Get(context.Background(), "sluice-jm-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lost []resourcemanager.Lost
	rm := newRM(t, d, func(l resourcemanager.Lost) { mu.Lock(); lost = append(lost, l); mu.Unlock() })
	ctx := context.Background()
	got := make(chan error, 1)
	go func() { _, err := rm.RequestSlots(ctx, "job", 2); got <- err }()

	p := waitPods(t, cs, 1)[0]
	if !strings.HasPrefix(p.Name, "prod-tm-") {
		t.Errorf("name %q", p.Name)
	}
	for k, v := range map[string]string{"team": "data", k8sdriver.LabelName: "sluice", k8sdriver.LabelComponent: "taskmanager", k8sdriver.LabelCluster: "prod"} {
		if p.Labels[k] != v {
			t.Errorf("label %s = %q, want %q (labels %v)", k, p.Labels[k], v, p.Labels)
		}
	}
	if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].Name != "sluice-jm-0" || p.OwnerReferences[0].UID != jm.UID || p.OwnerReferences[0].Kind != "Pod" {
		t.Errorf("owner references %+v", p.OwnerReferences)
	}
	if p.Spec.ServiceAccountName != "sluice-tm" || p.Spec.RestartPolicy != corev1.RestartPolicyNever || len(p.Spec.Containers) != 2 {
		t.Errorf("spec %+v", p.Spec)
	}
	c := p.Spec.Containers[0]
	wantArgs := []string{"tm", "--blob", "s3://sluice/blobs", "--listen", "0.0.0.0:6122",
		"--jm=sluice-jm:6123", "--slots=2", "--resource-id=" + p.Name, "--memory-bytes=1073741824"}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("args %q\nwant %q", c.Args, wantArgs)
	}
	if q := c.Resources.Limits[corev1.ResourceMemory]; q.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("memory limit %v", q.String())
	}
	if len(p.Spec.Containers[1].Args) != 0 {
		t.Errorf("sidecar got args %q", p.Spec.Containers[1].Args)
	}

	// Deleted before its TaskManager registered, while the slots are
	// needed: noticed, and replaced.
	if err := cs.CoreV1().Pods("data").Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	second := waitPods(t, cs, 1)[0]
	if second.Name == p.Name {
		t.Fatalf("pod %s not replaced", p.Name)
	}
	register(t, rm, second.Name)
	if err := <-got; err != nil {
		t.Fatal(err)
	}

	// Deleted while its slots are held: the job is told it lost them.
	if err := cs.CoreV1().Pods("data").Delete(ctx, second.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(lost) != 1 || lost[0].ResourceID != second.Name || !strings.Contains(lost[0].Reason, "pod deleted") {
			return fmt.Errorf("lost %+v", lost)
		}
		return nil
	})
}

func TestFailedPodIsReportedAndDeleted(t *testing.T) {
	cs, d := setup(t)
	var mu sync.Mutex
	var lost []resourcemanager.Lost
	rm := newRM(t, d, func(l resourcemanager.Lost) { mu.Lock(); lost = append(lost, l); mu.Unlock() })
	ctx := context.Background()
	go rm.RequestSlots(ctx, "job", 2) //nolint:errcheck // checked through the pods
	p := waitPods(t, cs, 1)[0]
	register(t, rm, p.Name)
	p.Status.Phase = corev1.PodFailed
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "taskmanager", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}
	if _, err := cs.CoreV1().Pods("data").UpdateStatus(ctx, &p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(lost) != 1 || !strings.Contains(lost[0].Reason, "OOMKilled") {
			return fmt.Errorf("lost %+v", lost)
		}
		return nil
	})
	// The failed pod is deleted.
	testutil.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		for _, q := range tmPods(t, cs) {
			if q.Name == p.Name {
				return fmt.Errorf("failed pod %s still there", p.Name)
			}
		}
		return nil
	})
}

func TestIdlePodIsDeletedAndRecoveredOnesAdopted(t *testing.T) {
	old := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "prod-tm-old", Namespace: "data", UID: "old-uid",
		Labels:          map[string]string{k8sdriver.LabelName: "sluice", k8sdriver.LabelComponent: "taskmanager", k8sdriver.LabelCluster: "prod"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "sluice-jm-1", UID: "old-jm-uid"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	done := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "prod-tm-done", Namespace: "data",
		Labels: map[string]string{k8sdriver.LabelName: "sluice", k8sdriver.LabelComponent: "taskmanager", k8sdriver.LabelCluster: "prod"}},
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "staging-tm-x", Namespace: "data",
		Labels: map[string]string{k8sdriver.LabelName: "sluice", k8sdriver.LabelComponent: "taskmanager", k8sdriver.LabelCluster: "staging"}}}
	cs, d := setup(t, old, done, other)
	ctx := context.Background()
	recovered, err := d.Initialize(ctx, resourcemanager.DriverEnv{JobManagerAddress: "sluice-jm:6123", OnTerminated: func(string, string) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(ctx)
	if !slices.Equal(recovered, []string{"prod-tm-old"}) {
		t.Fatalf("recovered %v", recovered)
	}
	pods := tmPods(t, cs)
	if len(pods) != 1 || pods[0].Name != "prod-tm-old" {
		t.Fatalf("pods %v: the finished one should be deleted", pods)
	}
	if refs := pods[0].OwnerReferences; len(refs) != 2 || refs[1].UID != "jm-uid" {
		t.Fatalf("owner references %+v: want the new JobManager's added", refs)
	}
	if err := d.ReleaseTaskManager(ctx, "prod-tm-old"); err != nil {
		t.Fatal(err)
	}
	if err := d.ReleaseTaskManager(ctx, "prod-tm-old"); err != nil {
		t.Fatalf("second release: %v", err)
	}
	if pods := tmPods(t, cs); len(pods) != 0 {
		t.Fatalf("pods %v", pods)
	}
	if _, err := cs.CoreV1().Pods("data").Get(ctx, "staging-tm-x", metav1.GetOptions{}); err != nil {
		t.Fatalf("another cluster's pod: %v", err)
	}
}

func TestIdleTaskManagerPodIsDeleted(t *testing.T) {
	cs, d := setup(t)
	rm := newRM(t, d, nil)
	ctx := context.Background()
	go func() {
		if s, err := rm.RequestSlots(ctx, "job", 1); err == nil {
			rm.ReleaseSlots(s[0].AllocationID)
		}
	}()
	p := waitPods(t, cs, 1)[0]
	register(t, rm, p.Name)
	waitPods(t, cs, 0)
}

func TestMissingOwnerPodFailsInitialize(t *testing.T) {
	cs := fake.NewClientset()
	tpl, _ := k8sdriver.ParsePodTemplate([]byte(template), "")
	d, err := k8sdriver.New(k8sdriver.Config{Client: cs, Namespace: "data", Template: tpl, OwnerPod: "nope"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Initialize(context.Background(), resourcemanager.DriverEnv{JobManagerAddress: "x:1"})
	if err == nil || !strings.Contains(err.Error(), "the JobManager's own pod data/nope (--owner-pod)") {
		t.Fatalf("err = %v", err)
	}
}
