// Package kubernetes holds the manifests of a Sluice session cluster on
// Kubernetes (the *.yaml files beside this one: JobManagers with HA on
// etcd, their Service and RBAC, MinIO, the TaskManager pod template) and
// the test that parses them with client-go's decoder and checks they
// refer to each other correctly. It has no code of its own; see
// docs/kubernetes.md.
package kubernetes
