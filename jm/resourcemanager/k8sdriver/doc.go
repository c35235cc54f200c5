// Package k8sdriver is the ResourceManager's Kubernetes driver: one pod per
// TaskManager, made from a pod template, labelled so the driver finds its
// own, owned by the JobManager's pod so Kubernetes deletes them with it,
// and watched so a pod that is deleted or fails is reported terminated
// (the ResourceManager then asks for a replacement while slots are needed).
//
// It is the only package that imports k8s.io/client-go (the layer rules in
// internal/check/layers.txt keep it so): the rest of the JobManager sees a
// resourcemanager.Driver.
package k8sdriver
