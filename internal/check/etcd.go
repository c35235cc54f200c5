package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// etcdVersion is the pinned etcd server; bumping it builds a new cached
// binary.
const etcdVersion = "v3.7.3"

// etcdMain is the scratch module's program: etcd's embed package behind
// the three flags the HA tests pass. go.etcd.io/etcd/server/v3 cannot be
// `go install`ed (its go.mod has replace directives), so it is built as a
// dependency of this module instead.
const etcdMain = `package main

import (
	"flag"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	dir := flag.String("data-dir", "", "data directory")
	client := flag.String("listen-client-urls", "http://127.0.0.1:2379", "client URL")
	peer := flag.String("listen-peer-urls", "http://127.0.0.1:2380", "peer URL")
	flag.Parse()
	cfg := embed.NewConfig()
	cfg.Dir = *dir
	cu, err := url.Parse(*client)
	if err != nil {
		log.Fatal(err)
	}
	pu, err := url.Parse(*peer)
	if err != nil {
		log.Fatal(err)
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	cfg.LogLevel = "error"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatal(err)
	}
	<-e.Server.ReadyNotify()
	os.Stdout.WriteString("ready\n")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	select {
	case <-sig:
	case err := <-e.Err():
		log.Fatal(err)
	}
	e.Close()
}
`

// ensureEtcd returns the cached etcd binary, building it (about two
// minutes) only when it is missing.
func ensureEtcd(ctx context.Context) (string, error) {
	gomod := "module sluice-etcd\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 " + etcdVersion + "\n"
	return scratchBuild(ctx, "etcd", etcdVersion, gomod, etcdMain, true)
}

// scratchBuild returns the cached binary name of version, building it from
// a scratch module (gomod, mainSrc) when it is missing and build is set;
// missing and not built, it returns "". The binary is renamed into place,
// so an interrupted build leaves none.
func scratchBuild(ctx context.Context, name, version, gomod, mainSrc string, build bool) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "sluice", name, version)
	bin := filepath.Join(dir, name)
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		return bin, nil
	}
	if !build {
		return "", nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	src, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte(gomod), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(mainSrc), 0o644); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "check: building %s %s into %s (minutes, once per machine)\n", name, version, dir)
	env := []string{"GOFLAGS=-buildvcs=false", "GOWORK=off"}
	if _, err := runIn(ctx, src, env, "go", "mod", "tidy"); err != nil {
		return "", err
	}
	if _, err := runIn(ctx, src, env, "go", "build", "-o", filepath.Join(src, name), "."); err != nil {
		return "", err
	}
	if err := os.Rename(filepath.Join(src, name), bin); err != nil {
		return "", err
	}
	return bin, nil
}
