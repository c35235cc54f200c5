package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sluicehq/sluice/jm"
	"github.com/sluicehq/sluice/jm/resourcemanager"
	"github.com/sluicehq/sluice/jm/resourcemanager/k8sdriver"
	"github.com/sluicehq/sluice/jm/resourcemanager/processdriver"
)

// serviceAccountNamespace is where a pod finds its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// driverOpts are the flags of `sluice jm` that choose and configure the
// ResourceManagerDriver (docs/kubernetes.md, docs/OPERATIONS.md).
type driverOpts struct {
	kind         string
	maxTMs       int
	tmSlots      int
	tmMemory     int64
	idleTimeout  time.Duration
	startTimeout time.Duration
	executable   string
	logDir       string
	tmArgs       []string
	podTemplate  string
	tmContainer  string
	namespace    string
	ownerPod     string
	clusterID    string
	tmJM         string
	tmListenHost string
}

func (o *driverOpts) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.kind, "driver", "standalone", "how TaskManagers are started: standalone (by hand), process (child processes of this JobManager) or kubernetes (pods)")
	f.IntVar(&o.maxTMs, "max-taskmanagers", resourcemanager.DefaultMaxTaskManagers, "process and kubernetes drivers: most TaskManagers running at once")
	f.IntVar(&o.tmSlots, "tm-slots", resourcemanager.DefaultTaskManagerSlots, "process and kubernetes drivers: slots of each TaskManager started")
	f.Int64Var(&o.tmMemory, "tm-memory-bytes", 0, "process and kubernetes drivers: memory of each TaskManager started (kubernetes: the container's memory request and limit where the template sets none; default: none)")
	f.DurationVar(&o.idleTimeout, "tm-idle-timeout", resourcemanager.DefaultTaskManagerIdleTimeout, "process and kubernetes drivers: a started TaskManager holding no slot this long is stopped")
	f.DurationVar(&o.startTimeout, "tm-start-timeout", resourcemanager.DefaultTaskManagerStartTimeout, "process and kubernetes drivers: a started TaskManager that has not registered after this long is stopped and another asked for")
	f.StringVar(&o.executable, "tm-executable", "", "process driver: the sluice binary to run as `sluice tm` (default: this one)")
	f.StringVar(&o.logDir, "tm-log-dir", "", "process driver: directory of the TaskManagers' log files, one <resource id>.log each (default: under the user cache dir)")
	f.StringArrayVar(&o.tmArgs, "tm-arg", nil, "process driver: one more argument for every `sluice tm` (repeat the flag; --blob and --secret-file are passed on already)")
	f.StringVar(&o.tmJM, "tm-jm", "", "process and kubernetes drivers: the --jm given to the TaskManagers started (default: this JobManager's advertised address; with --ha, the etcd:// URL so they follow the leader)")
	f.StringVar(&o.tmListenHost, "tm-listen-host", "127.0.0.1", "process driver: the host the TaskManagers listen on")
	f.StringVar(&o.podTemplate, "pod-template", "", "kubernetes driver: the TaskManager pod template file (YAML, kind Pod; deploy/kubernetes/taskmanager-pod-template.yaml)")
	f.StringVar(&o.tmContainer, "tm-container", "", "kubernetes driver: the template's container that runs sluice tm (default \""+k8sdriver.DefaultContainer+"\", or the only one)")
	f.StringVar(&o.namespace, "namespace", "", "kubernetes driver: namespace of the TaskManager pods (default: this pod's)")
	f.StringVar(&o.ownerPod, "owner-pod", os.Getenv("POD_NAME"), "kubernetes driver: this JobManager's pod, the owner of the TaskManager pods (default $POD_NAME)")
	f.StringVar(&o.clusterID, "cluster-id", k8sdriver.DefaultClusterID, "kubernetes driver: the sluice.dev/cluster label of this cluster's pods, and their name prefix")
}

// build returns the driver and active-mode settings the flags ask for;
// nil for standalone.
func (o *driverOpts) build(blobURL, secretFile string) (resourcemanager.Driver, jm.ActiveConfig, error) {
	act := jm.ActiveConfig{
		TaskManager:     resourcemanager.ResourceSpec{Slots: o.tmSlots, MemoryBytes: o.tmMemory},
		MaxTaskManagers: o.maxTMs,
		IdleTimeout:     o.idleTimeout,
		StartTimeout:    o.startTimeout,

		JobManagerAddress: o.tmJM,
	}
	if o.kind != "standalone" {
		if o.maxTMs < 1 || o.tmSlots < 1 || o.tmSlots > resourcemanager.MaxSlotsPerTaskManager || o.tmMemory < 0 || o.idleTimeout <= 0 || o.startTimeout <= 0 {
			return nil, act, usageErr(fmt.Errorf("--max-taskmanagers %d --tm-slots %d --tm-memory-bytes %d --tm-idle-timeout %s --tm-start-timeout %s: need at least 1 task manager, 1 to %d slots, no negative memory and positive timeouts",
				o.maxTMs, o.tmSlots, o.tmMemory, o.idleTimeout, o.startTimeout, resourcemanager.MaxSlotsPerTaskManager))
		}
	}
	switch o.kind {
	case "standalone":
		return nil, act, nil
	case "process":
		args := []string{}
		if blobURL != "" {
			args = append(args, "--blob", blobURL)
		}
		if secretFile != "" {
			args = append(args, "--secret-file", secretFile)
		}
		dir := o.logDir
		if dir == "" {
			dir = defaultDir("tm-logs")
		}
		d, err := processdriver.New(processdriver.Config{
			Executable: o.executable,
			Args:       append(args, o.tmArgs...),
			LogDir:     dir,
			ListenHost: o.tmListenHost,
		})
		if err != nil {
			return nil, act, usageErr(err)
		}
		return d, act, nil
	case "kubernetes":
		if o.podTemplate == "" {
			return nil, act, usageErr(errors.New("--driver kubernetes needs --pod-template FILE (a Pod; see deploy/kubernetes/taskmanager-pod-template.yaml)"))
		}
		tpl, err := k8sdriver.LoadPodTemplate(o.podTemplate, o.tmContainer)
		if err != nil {
			return nil, act, usageErr(err)
		}
		ns := o.namespace
		if ns == "" {
			b, err := os.ReadFile(serviceAccountNamespace)
			if err != nil {
				return nil, act, usageErr(fmt.Errorf("--driver kubernetes: no --namespace, and not running in a pod (%w)", err))
			}
			ns = strings.TrimSpace(string(b))
		}
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, act, fmt.Errorf("--driver kubernetes: the API server: %w (the kubernetes driver runs inside a pod, with a service account)", err)
		}
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return nil, act, fmt.Errorf("--driver kubernetes: %w", err)
		}
		d, err := k8sdriver.New(k8sdriver.Config{Client: cs, Namespace: ns, Template: tpl, Container: o.tmContainer, ClusterID: o.clusterID, OwnerPod: o.ownerPod})
		if err != nil {
			return nil, act, usageErr(err)
		}
		return d, act, nil
	default:
		return nil, act, usageErr(fmt.Errorf("--driver %q: want standalone, process or kubernetes", o.kind))
	}
}
