package k8sdriver

import (
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
)

// DefaultContainer is the name of the template's container that runs
// `sluice tm`, when the template has more than one.
const DefaultContainer = "taskmanager"

// LoadPodTemplate reads a pod template file (YAML or JSON, kind Pod).
//
// # Errors
//
// The file cannot be read, or ParsePodTemplate's errors.
func LoadPodTemplate(path, container string) (*corev1.Pod, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pod template: %w", err)
	}
	p, err := ParsePodTemplate(b, container)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// ParsePodTemplate decodes a pod template: a Kubernetes Pod (apiVersion v1,
// kind Pod) whose container named container (empty: DefaultContainer, or
// the only container) runs `sluice tm` with the blob store and cache flags
// it needs; the driver adds --jm, --slots and --resource-id, the pod's
// name, labels and owner.
//
// # Errors
//
// Text that is not a Kubernetes object, an object that is not a Pod, a
// Pod without that container, or a container without an image.
func ParsePodTemplate(data []byte, container string) (*corev1.Pod, error) {
	obj, gvk, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("pod template is not a Kubernetes object: %w (it must be YAML or JSON with apiVersion: v1 and kind: Pod)", err)
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("pod template is a %s, not a Pod: write a Pod (apiVersion: v1, kind: Pod) whose %q container runs sluice tm", gvk.Kind, containerName(container))
	}
	if _, err := tmContainer(pod, container); err != nil {
		return nil, err
	}
	return pod, nil
}

func containerName(c string) string {
	if c == "" {
		return DefaultContainer
	}
	return c
}

// tmContainer returns the index of the container that runs sluice tm.
func tmContainer(pod *corev1.Pod, name string) (int, error) {
	cs := pod.Spec.Containers
	if len(cs) == 0 {
		return 0, fmt.Errorf("pod template has no containers: add one named %q that runs sluice tm", containerName(name))
	}
	idx := -1
	for i, c := range cs {
		if c.Name == containerName(name) {
			idx = i
		}
	}
	if idx < 0 && name == "" && len(cs) == 1 {
		idx = 0
	}
	if idx < 0 {
		return 0, fmt.Errorf("pod template has no container named %q: name the one that runs sluice tm so (or pass --tm-container)", containerName(name))
	}
	if cs[idx].Image == "" {
		return 0, fmt.Errorf("pod template container %q has no image: set the sluice image", cs[idx].Name)
	}
	return idx, nil
}
