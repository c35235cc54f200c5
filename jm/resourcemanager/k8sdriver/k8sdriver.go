package k8sdriver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/sluicehq/sluice/jm/resourcemanager"
)

// Labels on every TaskManager pod the driver makes; LabelCluster's value
// tells clusters in one namespace apart.
const (
	LabelName      = "app.kubernetes.io/name"      // "sluice"
	LabelComponent = "app.kubernetes.io/component" // "taskmanager"
	LabelCluster   = "sluice.dev/cluster"
)

// DefaultClusterID is the LabelCluster value when Config.ClusterID is empty.
const DefaultClusterID = "sluice"

// Config configures a Driver.
type Config struct {
	// Client talks to the API server (kubernetes.NewForConfig, or the fake
	// clientset in tests). Required.
	Client kubernetes.Interface
	// Namespace the pods are made in. Required.
	Namespace string
	// Template is the TaskManager pod (ParsePodTemplate). Required.
	Template *corev1.Pod
	// Container names the template's container that runs sluice tm; empty
	// means DefaultContainer, or the only one.
	Container string
	// ClusterID is the LabelCluster value, also the pods' name prefix;
	// empty means DefaultClusterID.
	ClusterID string
	// OwnerPod is the JobManager's pod (from the downward API): every
	// TaskManager pod gets an owner reference to it, so Kubernetes deletes
	// them when it is deleted. Empty means no owner.
	OwnerPod string
}

// Driver makes one pod per TaskManager. Close stops the watch but leaves
// the pods: they belong to the JobManager's pod, and a JobManager that
// starts again (a restarted container, a new HA leader) adopts those still
// running.
type Driver struct {
	cfg   Config
	sel   labels.Selector
	owner *metav1.OwnerReference

	mu       sync.Mutex
	env      resourcemanager.DriverEnv
	log      *slog.Logger
	known    map[string]bool // pods this driver made or adopted and has not released
	stop     context.CancelFunc
	done     chan struct{}
	watchErr error // the last watch error, for tests and logs
}

var _ resourcemanager.Driver = (*Driver)(nil)

// New returns a Kubernetes Driver.
//
// # Errors
//
// A Config without Client, Namespace or a valid Template.
func New(cfg Config) (*Driver, error) {
	if cfg.Client == nil {
		return nil, errors.New("kubernetes driver: no API client")
	}
	if cfg.Namespace == "" {
		return nil, errors.New("kubernetes driver: no namespace: set --namespace")
	}
	if cfg.Template == nil {
		return nil, errors.New("kubernetes driver: no pod template: set --pod-template")
	}
	if _, err := tmContainer(cfg.Template, cfg.Container); err != nil {
		return nil, fmt.Errorf("kubernetes driver: %w", err)
	}
	if cfg.ClusterID == "" {
		cfg.ClusterID = DefaultClusterID
	}
	sel := labels.SelectorFromSet(labels.Set{LabelName: "sluice", LabelComponent: "taskmanager", LabelCluster: cfg.ClusterID})
	return &Driver{cfg: cfg, sel: sel, known: map[string]bool{}}, nil
}

// Name returns "kubernetes".
func (d *Driver) Name() string { return "kubernetes" }

// Initialize finds the JobManager's pod (for owner references), adopts the
// cluster's TaskManager pods still running (deleting finished ones), and
// starts watching the cluster's pods.
//
// # Errors
//
// The API server cannot be reached or refuses (RBAC: the service account
// needs get, list, watch, create, update and delete on pods).
func (d *Driver) Initialize(ctx context.Context, env resourcemanager.DriverEnv) ([]string, error) {
	d.mu.Lock()
	d.env = env
	d.log = env.Logger
	if d.log == nil {
		d.log = slog.Default()
	}
	d.mu.Unlock()
	pods := d.cfg.Client.CoreV1().Pods(d.cfg.Namespace)
	if d.cfg.OwnerPod != "" {
		p, err := pods.Get(ctx, d.cfg.OwnerPod, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("kubernetes driver: the JobManager's own pod %s/%s (--owner-pod): %w", d.cfg.Namespace, d.cfg.OwnerPod, err)
		}
		d.owner = &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID}
	}
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: d.sel.String()})
	if err != nil {
		return nil, fmt.Errorf("kubernetes driver: list task manager pods in %s: %w", d.cfg.Namespace, err)
	}
	var recovered []string
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		if ended(p) {
			d.deletePod(ctx, p.Name)
			continue
		}
		d.adopt(ctx, p)
		recovered = append(recovered, p.Name)
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: d.sel.String(), ResourceVersion: list.ResourceVersion})
	if err != nil {
		return nil, fmt.Errorf("kubernetes driver: watch task manager pods in %s: %w", d.cfg.Namespace, err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	d.mu.Lock()
	for _, n := range recovered {
		d.known[n] = true
	}
	d.stop, d.done = cancel, make(chan struct{})
	d.mu.Unlock()
	go d.watchLoop(wctx, w)
	slices.Sort(recovered)
	return recovered, nil
}

// adopt adds this JobManager's owner reference to a pod an earlier one
// made, so the pod outlives the earlier one's pod. Best effort: a pod left
// without it lives until it is released or its old owner goes.
func (d *Driver) adopt(ctx context.Context, p *corev1.Pod) {
	if d.owner == nil || slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == d.owner.UID }) {
		return
	}
	p = p.DeepCopy()
	p.OwnerReferences = append(p.OwnerReferences, *d.owner)
	if _, err := d.cfg.Client.CoreV1().Pods(d.cfg.Namespace).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		d.log.Warn("could not adopt task manager pod", "pod", p.Name, "err", err)
	}
}

// RequestTaskManager creates a pod from the template, named
// <cluster>-tm-<random>, with the driver's labels, the owner reference, and
// --jm, --slots, --resource-id (and --memory-bytes) after the container's
// arguments. A spec's memory becomes the container's memory request and
// limit where the template sets none.
//
// # Errors
//
// The API server refused the pod (RBAC, quota, an invalid template).
func (d *Driver) RequestTaskManager(ctx context.Context, spec resourcemanager.ResourceSpec) (string, error) {
	d.mu.Lock()
	jm := d.env.JobManagerAddress
	d.mu.Unlock()
	if jm == "" {
		return "", errors.New("kubernetes driver: not initialized")
	}
	pod, err := d.pod(spec, jm)
	if err != nil {
		return "", err
	}
	// Known before it exists: the watch may see the pod end before Create
	// returns.
	d.mu.Lock()
	d.known[pod.Name] = true
	d.mu.Unlock()
	created, err := d.cfg.Client.CoreV1().Pods(d.cfg.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		d.mu.Lock()
		delete(d.known, pod.Name)
		d.mu.Unlock()
		return "", fmt.Errorf("kubernetes driver: create pod %s: %w", pod.Name, err)
	}
	d.log.Info("created task manager pod", "pod", created.Name, "namespace", d.cfg.Namespace, "slots", spec.Slots)
	return created.Name, nil
}

// pod builds the pod for one TaskManager from the template.
func (d *Driver) pod(spec resourcemanager.ResourceSpec, jm string) (*corev1.Pod, error) {
	if spec.Slots < 1 {
		return nil, fmt.Errorf("kubernetes driver: %d slots: need at least 1", spec.Slots)
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("kubernetes driver: pod name: %w", err)
	}
	p := d.cfg.Template.DeepCopy()
	p.ObjectMeta = metav1.ObjectMeta{
		Name:        d.cfg.ClusterID + "-tm-" + hex.EncodeToString(b[:]),
		Namespace:   d.cfg.Namespace,
		Labels:      map[string]string{},
		Annotations: d.cfg.Template.Annotations,
	}
	for k, v := range d.cfg.Template.Labels {
		p.Labels[k] = v
	}
	p.Labels[LabelName], p.Labels[LabelComponent], p.Labels[LabelCluster] = "sluice", "taskmanager", d.cfg.ClusterID
	if d.owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*d.owner}
	}
	// A crashed TaskManager should end the pod, so the watch reports it and
	// the ResourceManager replaces it; Always would hide it in restarts.
	if p.Spec.RestartPolicy == "" {
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
	i, err := tmContainer(p, d.cfg.Container)
	if err != nil {
		return nil, fmt.Errorf("kubernetes driver: %w", err)
	}
	c := &p.Spec.Containers[i]
	c.Args = append(c.Args, "--jm="+jm, "--slots="+strconv.Itoa(spec.Slots), "--resource-id="+p.Name)
	if spec.MemoryBytes > 0 {
		c.Args = append(c.Args, "--memory-bytes="+strconv.FormatInt(spec.MemoryBytes, 10))
		q := *resource.NewQuantity(spec.MemoryBytes, resource.BinarySI)
		if c.Resources.Limits == nil {
			c.Resources.Limits = corev1.ResourceList{}
		}
		if c.Resources.Requests == nil {
			c.Resources.Requests = corev1.ResourceList{}
		}
		if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
			c.Resources.Limits[corev1.ResourceMemory] = q
		}
		if _, ok := c.Resources.Requests[corev1.ResourceMemory]; !ok {
			c.Resources.Requests[corev1.ResourceMemory] = q
		}
	}
	return p, nil
}

// ReleaseTaskManager deletes the pod. One already gone is not an error.
//
// # Errors
//
// The API server refused the deletion.
func (d *Driver) ReleaseTaskManager(ctx context.Context, id string) error {
	d.mu.Lock()
	delete(d.known, id)
	d.mu.Unlock()
	err := d.cfg.Client.CoreV1().Pods(d.cfg.Namespace).Delete(ctx, id, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kubernetes driver: delete pod %s: %w", id, err)
	}
	return nil
}

func (d *Driver) deletePod(ctx context.Context, name string) {
	err := d.cfg.Client.CoreV1().Pods(d.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		d.log.Warn("could not delete ended task manager pod", "pod", name, "err", err)
	}
}

// Close stops the watch. The pods stay (see Driver).
func (d *Driver) Close(context.Context) error {
	d.mu.Lock()
	stop, done := d.stop, d.done
	d.stop = nil
	d.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	return nil
}

// ended reports whether a pod's containers have stopped for good.
func ended(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
}

// watchLoop follows pod events; when the watch ends (the API server closes
// watches every few minutes) it lists again, reports the pods that went
// meanwhile, and watches again, backing off while the server fails.
func (d *Driver) watchLoop(ctx context.Context, w watch.Interface) {
	defer close(d.done)
	backoff := 100 * time.Millisecond
	for {
		d.follow(ctx, w)
		w.Stop()
		for {
			if ctx.Err() != nil {
				return
			}
			var err error
			if w, err = d.rewatch(ctx); err == nil {
				backoff = 100 * time.Millisecond
				break
			}
			d.mu.Lock()
			d.watchErr = err
			d.mu.Unlock()
			d.log.Warn("kubernetes driver: watch task manager pods", "err", err, "retry_in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
		}
	}
}

// follow handles events until the watch or ctx ends.
func (d *Driver) follow(ctx context.Context, w watch.Interface) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			p, isPod := ev.Object.(*corev1.Pod)
			switch {
			case ev.Type == watch.Error:
				d.log.Warn("kubernetes driver: watch error", "err", apierrors.FromObject(ev.Object))
				return
			case !isPod || !d.sel.Matches(labels.Set(p.Labels)):
			case ev.Type == watch.Deleted:
				d.terminated(p.Name, "pod deleted")
			case ended(p):
				if d.terminated(p.Name, fmt.Sprintf("pod %s: %s", p.Status.Phase, podReason(p))) {
					d.deletePod(ctx, p.Name)
				}
			}
		}
	}
}

// rewatch lists the pods, reports those known and gone, and watches again.
func (d *Driver) rewatch(ctx context.Context) (watch.Interface, error) {
	pods := d.cfg.Client.CoreV1().Pods(d.cfg.Namespace)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: d.sel.String()})
	if err != nil {
		return nil, err
	}
	there := map[string]bool{}
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp == nil && !ended(p) {
			there[p.Name] = true
		}
	}
	d.mu.Lock()
	var gone []string
	for n := range d.known {
		if !there[n] {
			gone = append(gone, n)
		}
	}
	d.mu.Unlock()
	for _, n := range gone {
		d.terminated(n, "pod gone")
	}
	return pods.Watch(ctx, metav1.ListOptions{LabelSelector: d.sel.String(), ResourceVersion: list.ResourceVersion})
}

// terminated reports a known pod terminated once, and returns whether it
// was known.
func (d *Driver) terminated(name, reason string) bool {
	d.mu.Lock()
	known := d.known[name]
	delete(d.known, name)
	f := d.env.OnTerminated
	d.mu.Unlock()
	if known && f != nil {
		d.log.Warn("task manager pod ended", "pod", name, "reason", reason)
		f(name, reason)
	}
	return known
}

func podReason(p *corev1.Pod) string {
	for _, s := range p.Status.ContainerStatuses {
		if t := s.State.Terminated; t != nil {
			return fmt.Sprintf("container %s exited %d (%s)", s.Name, t.ExitCode, t.Reason)
		}
	}
	if p.Status.Reason != "" {
		return p.Status.Reason
	}
	return "no reason given"
}
