package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// minioVersion is the pinned MinIO server; bumping it builds a new cached binary.
const minioVersion = "v0.0.0-20260212201848-7aac2a2c5b7c"

func main() {
	run := flag.String("run", "", "passed to go test -run")
	pkgs := flag.String("pkgs", "./...", "packages to test")
	noLint := flag.Bool("no-lint", false, "skip gofmt, vet and the generation check")
	buildKube := flag.Bool("build-kube-apiserver", false, "build and cache kube-apiserver (about 20 minutes) for the Kubernetes driver's opt-in real-API-server test; once cached it runs on every check")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := check(ctx, *run, *pkgs, !*noLint, *buildKube); err != nil {
		fmt.Fprintln(os.Stderr, "check: FAIL:", err)
		stop()
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "check: all steps passed")
}

func check(ctx context.Context, runPattern, pkgs string, lint, buildKube bool) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	if lint {
		steps := []struct {
			name string
			fn   func(context.Context, string) error
		}{
			{"gofmt", gofmtCheck},
			{"go vet", vet},
			{"layer rules (internal/check/layers.txt)", layersCheck},
			{"host code never sets GOMAXPROCS", procsCheck},
			{"kitex generation check", genCheck},
			{"wasip1 build of sdk/guest", guestBuild},
		}
		for _, s := range steps {
			step(s.name)
			if err := s.fn(ctx, root); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
		}
	}

	var required []string // the guest tests whose toolchain works
	for _, g := range guestToolchains {
		step(g.lang + " toolchain")
		ok, err := g.ensure(ctx, root)
		if err != nil {
			return fmt.Errorf("%s toolchain: %w", g.lang, err)
		}
		if ok {
			required = append(required, g.requireEnv+"=1")
		}
	}

	step("Prometheus")
	promEnv, err := ensurePrometheus(ctx, root)
	if err != nil {
		return fmt.Errorf("prometheus: %w", err)
	}
	required = append(required, promEnv...)

	step("MinIO")
	bin, err := ensureMinIO(ctx)
	if err != nil {
		return fmt.Errorf("install minio: %w", err)
	}
	srv, err := startMinIO(ctx, bin)
	if err != nil {
		return fmt.Errorf("start minio: %w", err)
	}
	defer srv.stop()
	fmt.Fprintf(os.Stderr, "check: MinIO %s serving on %s (data %s)\n", minioVersion, srv.endpoint, srv.dir)

	step("etcd")
	etcdBin, err := ensureEtcd(ctx)
	if err != nil {
		return fmt.Errorf("build etcd: %w", err)
	}
	required = append(required, "SLUICE_ETCD_BIN="+etcdBin)
	// The opt-in tier: only when cached (or asked to build).
	kubeBin, err := kubeAPIServer(ctx, buildKube)
	if err != nil {
		return fmt.Errorf("build kube-apiserver: %w", err)
	}
	if kubeBin != "" {
		required = append(required, "SLUICE_KUBE_APISERVER_BIN="+kubeBin)
		fmt.Fprintf(os.Stderr, "check: kube-apiserver %s cached: the Kubernetes driver's real-API-server test runs\n", kubeVersion)
	}

	step("go test -race")
	args := []string{"test", "-race", "-count=1", "-timeout=30m", "-v"}
	if runPattern != "" {
		args = append(args, "-run", runPattern)
	}
	args = append(args, strings.Fields(pkgs)...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(),
		"SLUICE_TEST_S3_ENDPOINT="+srv.endpoint,
		"SLUICE_TEST_S3_ACCESS_KEY="+srv.user,
		"SLUICE_TEST_S3_SECRET_KEY="+srv.password,
		"SLUICE_MINIO_BIN="+bin,
	)
	cmd.Env = append(cmd.Env, required...)
	return cmd.Run()
}

func step(name string) { fmt.Fprintf(os.Stderr, "check: == %s\n", name) }

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the sluice module: run from the repository")
	}
	return filepath.Dir(gomod), nil
}

func runIn(ctx context.Context, dir string, env []string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.Bytes(), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out.Bytes())
	}
	return out.Bytes(), nil
}

func gofmtCheck(ctx context.Context, root string) error {
	out, err := runIn(ctx, root, nil, "gofmt", "-l", ".")
	if err != nil {
		return err
	}
	if files := strings.TrimSpace(string(out)); files != "" {
		return fmt.Errorf("files not gofmt'd (run gofmt -w):\n%s", files)
	}
	return nil
}

func vet(ctx context.Context, root string) error {
	if _, err := runIn(ctx, root, nil, "go", "vet", "./..."); err != nil {
		return err
	}
	// The guest SDK and the examples only build for wasip1; vet them there too.
	_, err := runIn(ctx, root, []string{"GOOS=wasip1", "GOARCH=wasm"}, "go", "vet", "./sdk/guest/...", "./examples/...")
	return err
}

func guestBuild(ctx context.Context, root string) error {
	_, err := runIn(ctx, root, []string{"GOOS=wasip1", "GOARCH=wasm"}, "go", "build", "./sdk/guest/...", "./examples/...")
	return err
}

// genCheck regenerates kitex_gen in a scratch copy of the module and fails when
// the result differs from the committed tree.
func genCheck(ctx context.Context, root string) error {
	tmp, err := os.MkdirTemp("", "sluice-gencheck-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, f := range []string{"go.mod", "go.sum", "tools.go"} {
		if err := copyFile(filepath.Join(root, f), filepath.Join(tmp, f)); err != nil {
			return err
		}
	}
	thrifts, _ := filepath.Glob(filepath.Join(root, "idl", "*.thrift"))
	for _, f := range append(thrifts, filepath.Join(root, "idl", "gen.sh")) {
		if err := copyFile(f, filepath.Join(tmp, "idl", filepath.Base(f))); err != nil {
			return err
		}
	}
	if _, err := runIn(ctx, tmp, nil, "bash", "idl/gen.sh"); err != nil {
		return err
	}
	out, err := runIn(ctx, root, nil, "diff", "-r", filepath.Join(root, "idl", "kitex_gen"), filepath.Join(tmp, "idl", "kitex_gen"))
	if err != nil {
		return fmt.Errorf("idl/kitex_gen is out of date: run idl/gen.sh and commit\n%s", out)
	}
	return nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// ensureMinIO returns the cached MinIO binary, building it from the module
// proxy only when it is missing. The build lands in a temporary GOBIN and is
// renamed into place, so an interrupted build never leaves a broken binary.
func ensureMinIO(ctx context.Context) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "sluice", "minio", minioVersion)
	bin := filepath.Join(dir, "minio")
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmpBin, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmpBin)
	fmt.Fprintf(os.Stderr, "check: building MinIO %s into %s (several minutes, once per machine)\n", minioVersion, dir)
	if _, err := runIn(ctx, os.TempDir(), []string{"GOBIN=" + tmpBin, "GOFLAGS=-buildvcs=false"},
		"go", "install", "github.com/minio/minio@"+minioVersion); err != nil {
		return "", err
	}
	if err := os.Rename(filepath.Join(tmpBin, "minio"), bin); err != nil {
		return "", err
	}
	return bin, nil
}

type minioServer struct {
	endpoint, user, password, dir string
	cmd                           *exec.Cmd
	done                          chan struct{}
}

func startMinIO(ctx context.Context, bin string) (*minioServer, error) {
	dir, err := os.MkdirTemp("", "sluice-minio-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	consolePort, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &minioServer{
		endpoint: fmt.Sprintf("127.0.0.1:%d", port),
		user:     "sluicetest",
		password: "sluicetest-secret",
		dir:      dir,
		done:     make(chan struct{}),
	}
	s.cmd = exec.Command(bin, "server", "--quiet", "--address", s.endpoint,
		"--console-address", fmt.Sprintf("127.0.0.1:%d", consolePort), filepath.Join(dir, "data"))
	s.cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+s.user, "MINIO_ROOT_PASSWORD="+s.password,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off")
	logf, err := os.Create(filepath.Join(dir, "minio.log"))
	if err != nil {
		return nil, err
	}
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { s.cmd.Wait(); logf.Close(); close(s.done) }()

	deadline := time.Now().Add(60 * time.Second)
	for {
		// live answers before the server can serve requests; cluster answers
		// only once it can.
		if healthy(s.endpoint, "live") && healthy(s.endpoint, "cluster") {
			return s, nil
		}
		select {
		case <-s.done:
			log, _ := os.ReadFile(filepath.Join(dir, "minio.log"))
			os.RemoveAll(dir)
			return nil, fmt.Errorf("minio exited at start:\n%s", log)
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, errors.New("minio not live after 60s")
		}
	}
}

func healthy(endpoint, check string) bool {
	resp, err := http.Get("http://" + endpoint + "/minio/health/" + check)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (s *minioServer) stop() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
	os.RemoveAll(s.dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
