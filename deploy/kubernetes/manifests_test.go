package kubernetes

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/sluicehq/sluice/jm/resourcemanager/k8sdriver"
)

// manifests is every object of the directory's YAML files, decoded.
type manifests struct {
	namespaces   map[string]*corev1.Namespace
	services     map[string]*corev1.Service
	secrets      map[string]*corev1.Secret
	configMaps   map[string]*corev1.ConfigMap
	accounts     map[string]*corev1.ServiceAccount
	roles        map[string]*rbacv1.Role
	bindings     map[string]*rbacv1.RoleBinding
	pvcs         map[string]*corev1.PersistentVolumeClaim
	deployments  map[string]*appsv1.Deployment
	statefulSets map[string]*appsv1.StatefulSet
}

func load(t *testing.T) *manifests {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	m := &manifests{map[string]*corev1.Namespace{}, map[string]*corev1.Service{}, map[string]*corev1.Secret{},
		map[string]*corev1.ConfigMap{}, map[string]*corev1.ServiceAccount{}, map[string]*rbacv1.Role{},
		map[string]*rbacv1.RoleBinding{}, map[string]*corev1.PersistentVolumeClaim{}, map[string]*appsv1.Deployment{},
		map[string]*appsv1.StatefulSet{}}
	dec := scheme.Codecs.UniversalDeserializer()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
		for i := 0; ; i++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: document %d: %v", f, i, err)
			}
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			obj, gvk, err := dec.Decode(doc, nil, nil)
			if err != nil {
				t.Fatalf("%s: document %d: %v", f, i, err)
			}
			if err := m.add(obj); err != nil {
				t.Fatalf("%s: document %d (%s): %v", f, i, gvk.Kind, err)
			}
		}
	}
	return m
}

func (m *manifests) add(obj runtime.Object) error {
	put := func(name, ns string, into any) error {
		if name == "" {
			return errors.New("no name")
		}
		if _, isNS := into.(map[string]*corev1.Namespace); !isNS && ns != "sluice" {
			return fmt.Errorf("%s is in namespace %q, want sluice", name, ns)
		}
		return nil
	}
	var err error
	switch o := obj.(type) {
	case *corev1.Namespace:
		err, m.namespaces[o.Name] = put(o.Name, "", m.namespaces), o
	case *corev1.Service:
		err, m.services[o.Name] = put(o.Name, o.Namespace, m.services), o
	case *corev1.Secret:
		err, m.secrets[o.Name] = put(o.Name, o.Namespace, m.secrets), o
	case *corev1.ConfigMap:
		err, m.configMaps[o.Name] = put(o.Name, o.Namespace, m.configMaps), o
	case *corev1.ServiceAccount:
		err, m.accounts[o.Name] = put(o.Name, o.Namespace, m.accounts), o
	case *rbacv1.Role:
		err, m.roles[o.Name] = put(o.Name, o.Namespace, m.roles), o
	case *rbacv1.RoleBinding:
		err, m.bindings[o.Name] = put(o.Name, o.Namespace, m.bindings), o
	case *corev1.PersistentVolumeClaim:
		err, m.pvcs[o.Name] = put(o.Name, o.Namespace, m.pvcs), o
	case *appsv1.Deployment:
		err, m.deployments[o.Name] = put(o.Name, o.Namespace, m.deployments), o
	case *appsv1.StatefulSet:
		err, m.statefulSets[o.Name] = put(o.Name, o.Namespace, m.statefulSets), o
	default:
		err = fmt.Errorf("unexpected kind %T: teach the test about it", obj)
	}
	return err
}

// workloads is every pod template the manifests run, by owner name, with
// the StatefulSets' volume claim templates.
func (m *manifests) workloads() map[string]corev1.PodTemplateSpec {
	out := map[string]corev1.PodTemplateSpec{}
	for n, d := range m.deployments {
		out["deployment/"+n] = d.Spec.Template
	}
	for n, s := range m.statefulSets {
		out["statefulset/"+n] = s.Spec.Template
	}
	return out
}

func TestManifestsParse(t *testing.T) {
	m := load(t)
	if len(m.namespaces) != 1 || m.namespaces["sluice"] == nil {
		t.Fatalf("namespaces %v", m.namespaces)
	}
	for _, n := range []string{"sluice-jobmanager", "sluice-etcd", "sluice-minio"} {
		if m.services[n] == nil {
			t.Errorf("no Service %s", n)
		}
	}
	// Selectors match their own pod labels.
	for n, d := range m.deployments {
		if !selects(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
			t.Errorf("deployment %s: selector %v does not match its pods %v", n, d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
		}
	}
	for n, s := range m.statefulSets {
		if !selects(s.Spec.Selector.MatchLabels, s.Spec.Template.Labels) {
			t.Errorf("statefulset %s: selector does not match its pods", n)
		}
		if m.services[s.Spec.ServiceName] == nil || m.services[s.Spec.ServiceName].Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("statefulset %s: serviceName %q is not a headless Service here", n, s.Spec.ServiceName)
		}
	}
}

func selects(sel, lbls map[string]string) bool {
	return len(sel) > 0 && labels.SelectorFromSet(sel).Matches(labels.Set(lbls))
}

// TestServicesReachPods: each Service selects the pods of exactly one
// workload, and each of its ports' targetPort is a port of those pods.
func TestServicesReachPods(t *testing.T) {
	m := load(t)
	for sn, s := range m.services {
		var hit []string
		for wn, w := range m.workloads() {
			if selects(s.Spec.Selector, w.Labels) {
				hit = append(hit, wn)
				for _, p := range s.Spec.Ports {
					if !hasPort(w.Spec, p.TargetPort) {
						t.Errorf("service %s port %s: targetPort %s is no container port of %s", sn, p.Name, p.TargetPort.String(), wn)
					}
				}
			}
		}
		if len(hit) != 1 {
			t.Errorf("service %s selects %v; want one workload", sn, hit)
		}
	}
}

func hasPort(spec corev1.PodSpec, target intstr.IntOrString) bool {
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if (target.Type == intstr.String && p.Name == target.StrVal) || (target.Type == intstr.Int && p.ContainerPort == target.IntVal) {
				return true
			}
		}
	}
	return false
}

// TestReferencesResolve: every Secret, ConfigMap, claim and service account
// a pod (or the TaskManager pod template) names is in the manifests, with
// the keys it reads.
func TestReferencesResolve(t *testing.T) {
	m := load(t)
	specs := map[string]corev1.PodSpec{}
	for n, w := range m.workloads() {
		specs[n] = w.Spec
	}
	specs["taskmanager pod template"] = tmTemplate(t, m).Spec
	for n, spec := range specs {
		if sa := spec.ServiceAccountName; sa != "" && m.accounts[sa] == nil {
			t.Errorf("%s: service account %s is not in the manifests", n, sa)
		}
		for _, c := range spec.Containers {
			for _, e := range c.Env {
				if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil {
					m.secretKey(t, n, r.SecretKeyRef.Name, r.SecretKeyRef.Key)
				}
			}
			for _, e := range c.EnvFrom {
				if e.SecretRef != nil && m.secrets[e.SecretRef.Name] == nil {
					t.Errorf("%s: envFrom secret %s is not in the manifests", n, e.SecretRef.Name)
				}
				if e.ConfigMapRef != nil && m.configMaps[e.ConfigMapRef.Name] == nil {
					t.Errorf("%s: envFrom config map %s is not in the manifests", n, e.ConfigMapRef.Name)
				}
			}
			for _, vm := range c.VolumeMounts {
				if !slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name }) && !claimTemplate(m, vm.Name) {
					t.Errorf("%s: container %s mounts volume %s that the pod lacks", n, c.Name, vm.Name)
				}
			}
		}
		for _, v := range spec.Volumes {
			switch {
			case v.ConfigMap != nil && m.configMaps[v.ConfigMap.Name] == nil:
				t.Errorf("%s: volume %s: config map %s is not in the manifests", n, v.Name, v.ConfigMap.Name)
			case v.Secret != nil && m.secrets[v.Secret.SecretName] == nil:
				t.Errorf("%s: volume %s: secret %s is not in the manifests", n, v.Name, v.Secret.SecretName)
			case v.PersistentVolumeClaim != nil && m.pvcs[v.PersistentVolumeClaim.ClaimName] == nil:
				t.Errorf("%s: volume %s: claim %s is not in the manifests", n, v.Name, v.PersistentVolumeClaim.ClaimName)
			}
		}
	}
}

func claimTemplate(m *manifests, name string) bool {
	for _, s := range m.statefulSets {
		for _, c := range s.Spec.VolumeClaimTemplates {
			if c.Name == name {
				return true
			}
		}
	}
	return false
}

func (m *manifests) secretKey(t *testing.T, who, name, key string) {
	t.Helper()
	s := m.secrets[name]
	if s == nil {
		t.Errorf("%s: secret %s is not in the manifests", who, name)
		return
	}
	if _, ok := s.StringData[key]; !ok {
		if _, ok := s.Data[key]; !ok {
			t.Errorf("%s: secret %s has no key %s", who, name, key)
		}
	}
}

// jobManager returns the JobManager container and its pod spec.
func jobManager(t *testing.T, m *manifests) (corev1.Container, corev1.PodSpec) {
	t.Helper()
	d := m.deployments["sluice-jobmanager"]
	if d == nil {
		t.Fatal("no Deployment sluice-jobmanager")
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "jobmanager" {
			return c, d.Spec.Template.Spec
		}
	}
	t.Fatal("sluice-jobmanager has no container jobmanager")
	return corev1.Container{}, corev1.PodSpec{}
}

// flag returns the value of --name=value in args.
func flag(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// tmTemplate finds the pod template file the JobManager's --pod-template
// names, through its volume mount and config map, and parses it as the
// driver does.
func tmTemplate(t *testing.T, m *manifests) *corev1.Pod {
	t.Helper()
	c, spec := jobManager(t, m)
	path, ok := flag(c.Args, "pod-template")
	if !ok {
		t.Fatal("the JobManager has no --pod-template")
	}
	for _, vm := range c.VolumeMounts {
		key := ""
		switch {
		case vm.SubPath != "" && vm.MountPath == path:
			key = vm.SubPath
		case vm.SubPath == "" && filepath.Dir(path) == filepath.Clean(vm.MountPath):
			key = filepath.Base(path)
		default:
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name != vm.Name || v.ConfigMap == nil {
				continue
			}
			cm := m.configMaps[v.ConfigMap.Name]
			if cm == nil {
				t.Fatalf("--pod-template %s: config map %s is not in the manifests", path, v.ConfigMap.Name)
			}
			text, ok := cm.Data[key]
			if !ok {
				t.Fatalf("--pod-template %s: config map %s has no key %s", path, cm.Name, key)
			}
			container, _ := flag(c.Args, "tm-container")
			pod, err := k8sdriver.ParsePodTemplate([]byte(text), container)
			if err != nil {
				t.Fatalf("--pod-template %s: %v", path, err)
			}
			return pod
		}
	}
	t.Fatalf("--pod-template %s is on no config map volume of the JobManager", path)
	return nil
}

// TestJobManagerWiring: the driver's RBAC, its owner pod, and the
// addresses in the JobManager's and TaskManagers' flags point at what the
// manifests define.
func TestJobManagerWiring(t *testing.T) {
	m := load(t)
	c, spec := jobManager(t, m)
	if v, _ := flag(c.Args, "driver"); v != "kubernetes" {
		t.Errorf("--driver %q", v)
	}
	// RBAC: the JobManager's service account may do what the driver does.
	sa := spec.ServiceAccountName
	need := []string{"get", "list", "watch", "create", "update", "delete"}
	granted := map[string]bool{}
	for _, b := range m.bindings {
		if !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == "sluice"
		}) {
			continue
		}
		r := m.roles[b.RoleRef.Name]
		if b.RoleRef.Kind != "Role" || r == nil {
			t.Errorf("role binding %s names role %s %s, not in the manifests", b.Name, b.RoleRef.Kind, b.RoleRef.Name)
			continue
		}
		for _, rule := range r.Rules {
			if slices.Contains(rule.APIGroups, "") && slices.Contains(rule.Resources, "pods") {
				for _, v := range rule.Verbs {
					granted[v] = true
				}
			}
		}
	}
	for _, v := range need {
		if !granted[v] {
			t.Errorf("service account %s may not %s pods: the Kubernetes driver needs %v", sa, v, need)
		}
	}
	// The owner pod comes from the downward API.
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "POD_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name"
	}) {
		t.Error("the JobManager has no POD_NAME from metadata.name: --owner-pod would be empty")
	}
	// Addresses: HA on the etcd Service, the blob store on MinIO's.
	for _, f := range []string{"ha", "tm-jm"} {
		v, ok := flag(c.Args, f)
		if !ok {
			t.Errorf("the JobManager has no --%s", f)
			continue
		}
		m.checkEtcd(t, "--"+f, v)
	}
	jmBlob, _ := flag(c.Args, "blob")
	m.checkBlob(t, "the JobManager's --blob", jmBlob)
	// The TaskManager template: the same blob store and secrets, its ports,
	// and no --jm, --slots or --resource-id (the driver adds them).
	tpl := tmTemplate(t, m)
	tc := tpl.Spec.Containers[0]
	if tb, _ := flag(tc.Args, "blob"); tb != jmBlob {
		t.Errorf("the TaskManagers' --blob %q differs from the JobManager's %q", tb, jmBlob)
	}
	for _, f := range []string{"jm", "slots", "resource-id"} {
		if _, ok := flag(tc.Args, f); ok {
			t.Errorf("the pod template sets --%s, which the driver sets", f)
		}
	}
	if !slices.Equal(envSecrets(c), envSecrets(tc)) {
		t.Errorf("the JobManager reads secrets %v, the TaskManagers %v: they must share the cluster secret and blob keys", envSecrets(c), envSecrets(tc))
	}
	for _, f := range []string{"listen", "data-listen"} {
		v, _ := flag(tc.Args, f)
		if !strings.HasPrefix(v, "0.0.0.0:") || !slices.ContainsFunc(tc.Ports, func(p corev1.ContainerPort) bool {
			return fmt.Sprint(p.ContainerPort) == strings.TrimPrefix(v, "0.0.0.0:")
		}) {
			t.Errorf("the TaskManagers' --%s %q: want 0.0.0.0:PORT with PORT a container port", f, v)
		}
	}
	for _, l := range []string{k8sdriver.LabelName, k8sdriver.LabelComponent, k8sdriver.LabelCluster} {
		if _, ok := tpl.Labels[l]; ok {
			t.Errorf("the pod template sets label %s, which the driver sets", l)
		}
	}
	// No workload is selected by the driver's labels: its pods are its own.
	id, _ := flag(c.Args, "cluster-id")
	mine := labels.Set{k8sdriver.LabelName: "sluice", k8sdriver.LabelComponent: "taskmanager", k8sdriver.LabelCluster: id}
	for n, s := range m.services {
		if labels.SelectorFromSet(s.Spec.Selector).Matches(mine) {
			t.Errorf("service %s selects the driver's TaskManager pods", n)
		}
	}
}

func envSecrets(c corev1.Container) []string {
	var out []string
	for _, e := range c.EnvFrom {
		if e.SecretRef != nil {
			out = append(out, e.SecretRef.Name)
		}
	}
	slices.Sort(out)
	return out
}

// checkEtcd checks an etcd://HOST:PORT[/CLUSTER] URL names the etcd
// Service's client port.
func (m *manifests) checkEtcd(t *testing.T, what, v string) {
	t.Helper()
	u, err := url.Parse(v)
	if err != nil || u.Scheme != "etcd" {
		t.Errorf("%s %q: want etcd://HOST:PORT/CLUSTER", what, v)
		return
	}
	m.checkServicePort(t, what, u.Hostname(), u.Port())
}

// checkBlob checks an s3:// URL's endpoint is the MinIO Service's port.
func (m *manifests) checkBlob(t *testing.T, what, v string) {
	t.Helper()
	u, err := url.Parse(v)
	if err != nil || u.Scheme != "s3" {
		t.Errorf("%s %q: want s3://BUCKET/PREFIX?endpoint=HOST:PORT", what, v)
		return
	}
	host, port, ok := strings.Cut(u.Query().Get("endpoint"), ":")
	if !ok {
		t.Errorf("%s %q: no endpoint=HOST:PORT", what, v)
		return
	}
	m.checkServicePort(t, what, host, port)
}

func (m *manifests) checkServicePort(t *testing.T, what, host, port string) {
	t.Helper()
	s := m.services[strings.TrimSuffix(host, ".sluice.svc")]
	if s == nil {
		t.Errorf("%s: host %s is no Service in the manifests", what, host)
		return
	}
	if !slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return fmt.Sprint(p.Port) == port }) {
		t.Errorf("%s: Service %s has no port %s", what, s.Name, port)
	}
}

func stripComments(doc []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}
