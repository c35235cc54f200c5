package k8sdriver_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sluicehq/sluice/internal/testutil"
)

// startAPIServer runs a real kube-apiserver (SLUICE_KUBE_APISERVER_BIN;
// docs/kubernetes.md says how to build one) on a private etcd
// (SLUICE_ETCD_BIN), with a namespace "data", and returns a client of it.
// Without the binaries the test is skipped: this is an opt-in tier, the
// fake clientset's tests are the suite's.
func startAPIServer(t *testing.T) kubernetes.Interface {
	t.Helper()
	bin := os.Getenv("SLUICE_KUBE_APISERVER_BIN")
	if bin == "" {
		t.Skip("no kube-apiserver: set SLUICE_KUBE_APISERVER_BIN (docs/kubernetes.md, \"Testing against a real API server\")")
	}
	etcd := testutil.StartEtcd(t)
	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyFile, tokens := filepath.Join(dir, "sa.key"), filepath.Join(dir, "tokens.csv")
	const token = "sluice-test-token"
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokens, []byte(token+`,admin,admin,"system:masters"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testutil.FreeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	cmd := exec.Command(bin, "--etcd-servers=http://"+etcd, "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port="+port, "--cert-dir="+dir, "--token-auth-file="+tokens, "--authorization-mode=AlwaysAllow",
		"--service-account-issuer=https://kubernetes.default.svc", "--service-account-key-file="+keyFile,
		"--service-account-signing-key-file="+keyFile, "--service-cluster-ip-range=10.0.0.0/24",
		"--disable-admission-plugins=ServiceAccount")
	logs := &testutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start kube-apiserver: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: "https://" + addr, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	testutil.CheckFor(t, 2*time.Minute, 100*time.Millisecond, func() error {
		select {
		case <-done:
			t.Fatalf("kube-apiserver exited:\n%s", logs.String())
		default:
		}
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "data"}}, metav1.CreateOptions{})
		return err
	})
	return cs
}

// TestPodsOnARealAPIServer is TestPodsFollowTheTemplateAndADeletedOneIsReplaced
// against a real API server: its validation, defaulting, UIDs, watch
// resource versions and deletion of unscheduled pods.
func TestPodsOnARealAPIServer(t *testing.T) {
	cs := startAPIServer(t)
	podsFollowTheTemplate(t, cs, setupOn(t, cs))
}
