package rpcserver_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cloudwego/kitex/server"
	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/jobmaster"
	jmsvc "github.com/sluicehq/sluice/idl/kitex_gen/sluice/jobmaster/jobmaster"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/resourcemanager"
	rmsvc "github.com/sluicehq/sluice/idl/kitex_gen/sluice/resourcemanager/resourcemanager"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/internal/rpcserver"
	"github.com/sluicehq/sluice/internal/rpcserver/rpcservertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, rpcservertest.LeakOptions()...) }

type rm struct{}

func (*rm) RegisterTaskManager(ctx context.Context, req *resourcemanager.RegisterTaskManagerRequest) (*resourcemanager.RegisterTaskManagerResponse, error) {
	switch req.ResourceId {
	case "panic":
		panic("kaboom")
	case "plain":
		return nil, errors.New("plain failure") // not mapped by the handler
	case "typed":
		return nil, rpcserver.ToWire(rpcerr.NotEnoughSlots(3, 1))
	}
	return &resourcemanager.RegisterTaskManagerResponse{RegistrationId: "r-" + req.ResourceId}, nil
}

func (*rm) Heartbeat(ctx context.Context, req *resourcemanager.HeartbeatRequest) (*resourcemanager.HeartbeatResponse, error) {
	return &resourcemanager.HeartbeatResponse{Known: req.RegistrationId != ""}, nil
}

type jmh struct{}

func (*jmh) UpdateTaskState(ctx context.Context, req *jobmaster.TaskStateUpdate) error {
	return rpcserver.ToWire(rpcerr.ErrStaleFencingToken)
}

func (*jmh) RequestNextSplit(ctx context.Context, req *jobmaster.NextSplitRequest) (*jobmaster.NextSplitResponse, error) {
	return &jobmaster.NextSplitResponse{Done: true}, nil
}

func (*jmh) AcknowledgeCheckpoint(context.Context, *jobmaster.AcknowledgeCheckpointRequest) error {
	return nil
}

func (*jmh) DeclineCheckpoint(context.Context, *jobmaster.DeclineCheckpointRequest) error {
	return nil
}

func TestServeSeveralServicesOnOnePort(t *testing.T) {
	ctx := context.Background()
	srv, err := rpcserver.Start(ctx, rpcserver.Config{Addr: "127.0.0.1:0"},
		func(s server.Server) error { return rmsvc.RegisterService(s, &rm{}) },
		func(s server.Server) error { return jmsvc.RegisterService(s, &jmh{}) },
	)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if strings.HasSuffix(srv.Addr(), ":0") {
		t.Fatalf("Addr() = %s, want the bound port", srv.Addr())
	}
	opts := rpcserver.ClientOptions(srv.Addr(), rpcserver.ClientConfig{})
	rc := rmsvc.MustNewClient("rm", opts...)
	jc := jmsvc.MustNewClient("jm", opts...)

	resp, err := rc.RegisterTaskManager(ctx, &resourcemanager.RegisterTaskManagerRequest{ResourceId: "tm1"})
	if err != nil || resp.RegistrationId != "r-tm1" {
		t.Fatalf("register: %v %v", resp, err)
	}
	if _, err := jc.RequestNextSplit(ctx, &jobmaster.NextSplitRequest{}); err != nil {
		t.Fatal(err)
	}
	err = rpcserver.FromCall(jc.UpdateTaskState(ctx, &jobmaster.TaskStateUpdate{}))
	if !errors.Is(err, rpcerr.ErrStaleFencingToken) {
		t.Fatalf("UpdateTaskState: %v", err)
	}

	_, err = rc.RegisterTaskManager(ctx, &resourcemanager.RegisterTaskManagerRequest{ResourceId: "typed"})
	if err = rpcserver.FromCall(err); !errors.Is(err, rpcerr.ErrNotEnoughSlots) || err.Error() != "not enough slots: need 3, free 1" {
		t.Fatalf("typed: %v", err)
	}
	_, err = rc.RegisterTaskManager(ctx, &resourcemanager.RegisterTaskManagerRequest{ResourceId: "panic"})
	if err = rpcserver.FromCall(err); !errors.Is(err, rpcerr.ErrInternal) || !strings.Contains(err.Error(), "kaboom") {
		t.Fatalf("panic: %v", err)
	}
	_, err = rc.RegisterTaskManager(ctx, &resourcemanager.RegisterTaskManagerRequest{ResourceId: "plain"})
	if err = rpcserver.FromCall(err); rpcerr.CodeOf(err) != rpcerr.CodeUnknown || err.Error() != "plain failure" {
		t.Fatalf("plain: %v (%v)", err, rpcerr.CodeOf(err))
	}
	// The server still serves after a panic.
	if _, err := rc.Heartbeat(ctx, &resourcemanager.HeartbeatRequest{RegistrationId: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = rc.Heartbeat(ctx, &resourcemanager.HeartbeatRequest{})
	if err = rpcserver.FromCall(err); !errors.Is(err, rpcerr.ErrUnavailable) {
		t.Fatalf("after close: %v", err)
	}
}

func TestFrameSizeLimit(t *testing.T) {
	ctx := context.Background()
	srv, err := rpcserver.Start(ctx, rpcserver.Config{MaxFrameSize: 4096},
		func(s server.Server) error { return rmsvc.RegisterService(s, &rm{}) })
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rc := rmsvc.MustNewClient("rm", rpcserver.ClientOptions(srv.Addr(), rpcserver.ClientConfig{})...)
	_, err = rc.RegisterTaskManager(ctx, &resourcemanager.RegisterTaskManagerRequest{ResourceId: strings.Repeat("x", 10000)})
	if err == nil {
		t.Fatal("oversized frame accepted")
	}
}

func TestStartErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := rpcserver.Start(ctx, rpcserver.Config{Addr: "256.0.0.1:x"}); err == nil {
		t.Fatal("bad address accepted")
	}
	_, err := rpcserver.Start(ctx, rpcserver.Config{},
		func(s server.Server) error { return rmsvc.RegisterService(s, &rm{}) },
		func(s server.Server) error { return rmsvc.RegisterService(s, &rm{}) })
	if err == nil {
		t.Fatal("same service twice accepted")
	}
}

func TestCloseRightAfterStart(t *testing.T) {
	srv, err := rpcserver.Start(context.Background(), rpcserver.Config{},
		func(s server.Server) error { return rmsvc.RegisterService(s, &rm{}) })
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
}

// tokenRM echoes the MetaToken of each call as its registration id.
type tokenRM struct{ rm }

func (*tokenRM) RegisterTaskManager(ctx context.Context, req *resourcemanager.RegisterTaskManagerRequest) (*resourcemanager.RegisterTaskManagerResponse, error) {
	tok, ok := rpcserver.Incoming(ctx, rpcserver.MetaToken)
	if !ok {
		tok = "<none>"
	}
	peer, _ := rpcserver.Incoming(ctx, rpcserver.MetaPeer)
	return &resourcemanager.RegisterTaskManagerResponse{RegistrationId: tok + "|" + peer}, nil
}

func TestMetadataTravelsInTTHeader(t *testing.T) {
	ctx := context.Background()
	srv, err := rpcserver.Start(ctx, rpcserver.Config{Addr: "127.0.0.1:0"},
		func(s server.Server) error { return rmsvc.RegisterService(s, &tokenRM{}) })
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, tc := range []struct {
		md   map[string]string
		want string
	}{
		{nil, "<none>|"},
		{map[string]string{rpcserver.MetaToken: "slc_abc"}, "slc_abc|"},
		{map[string]string{rpcserver.MetaToken: "t", rpcserver.MetaPeer: "p"}, "t|p"},
	} {
		c := rmsvc.MustNewClient("rm", rpcserver.ClientOptions(srv.Addr(), rpcserver.ClientConfig{Metadata: tc.md})...)
		resp, err := c.RegisterTaskManager(ctx, &resourcemanager.RegisterTaskManagerRequest{})
		if err != nil || resp.RegistrationId != tc.want {
			t.Fatalf("metadata %v: got %v %v, want %q", tc.md, resp, err, tc.want)
		}
	}
}

// TestIntervalClientBoundsCallsByReadTimeout checks that a client made with
// IntervalClientOptions answers like any other and that a server that
// accepts the connection and never answers (a frozen JobManager) ends the
// call at the Detach'ed deadline, although the context it was given cannot
// be cancelled.
func TestIntervalClientBoundsCallsByReadTimeout(t *testing.T) {
	ctx := context.Background()
	srv, err := rpcserver.Start(ctx, rpcserver.Config{Addr: "127.0.0.1:0"},
		func(s server.Server) error { return rmsvc.RegisterService(s, &rm{}) })
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rc := rmsvc.MustNewClient("rm", rpcserver.IntervalClientOptions(srv.Addr(), rpcserver.ClientConfig{})...)
	resp, err := rc.RegisterTaskManager(rpcserver.Detach(ctx), &resourcemanager.RegisterTaskManagerRequest{ResourceId: "tm1"})
	if err != nil || resp.RegistrationId != "r-tm1" {
		t.Fatalf("register: %v %v", resp, err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	held := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(held)
				return
			}
			held <- c // read nothing, answer nothing
		}
	}()
	defer func() {
		ln.Close()
		for c := range held {
			c.Close()
		}
	}()
	silent := rmsvc.MustNewClient("rm", rpcserver.IntervalClientOptions(ln.Addr().String(), rpcserver.ClientConfig{RPCTimeout: time.Minute})...)
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := silent.Heartbeat(rpcserver.Detach(cctx), &resourcemanager.HeartbeatRequest{RegistrationId: "x"})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a server that never answers answered")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the call was not ended by its 300ms deadline within 30s")
	}
}
