package main

import (
	"context"
	"strings"
)

// kubeVersion is the Kubernetes release whose kube-apiserver the opt-in
// driver tier runs; kubeStaging its staging modules, published at
// kubeStagingVersion (k8s.io/kubernetes's go.mod replaces them with
// directories of its own tree, so the scratch module pins them instead).
const (
	kubeVersion        = "v1.34.4"
	kubeStagingVersion = "v0.34.4"
	kubeStaging        = "api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider " +
		"cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api cri-client " +
		"csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms kube-aggregator " +
		"kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics mount-utils " +
		"pod-security-admission sample-apiserver sample-cli-plugin sample-controller"
)

const kubeAPIServerMain = `package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
`

// kubeAPIServer returns the cached kube-apiserver, building it (about 20
// minutes here) only when build is set; "" when it is not cached and not
// built, and the Kubernetes driver's real-API-server test skips.
func kubeAPIServer(ctx context.Context, build bool) (string, error) {
	var b strings.Builder
	b.WriteString("module sluice-kube-apiserver\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes " + kubeVersion + "\n\nreplace (\n")
	for _, m := range strings.Fields(kubeStaging) {
		b.WriteString("\tk8s.io/" + m + " => k8s.io/" + m + " " + kubeStagingVersion + "\n")
	}
	b.WriteString(")\n")
	return scratchBuild(ctx, "kube-apiserver", kubeVersion, b.String(), kubeAPIServerMain, build)
}
