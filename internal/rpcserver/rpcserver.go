package rpcserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/cloudwego/kitex/client"
	"github.com/cloudwego/kitex/pkg/endpoint"
	"github.com/cloudwego/kitex/pkg/kerrors"
	"github.com/cloudwego/kitex/pkg/remote"
	"github.com/cloudwego/kitex/pkg/remote/codec"
	"github.com/cloudwego/kitex/pkg/rpcinfo"
	"github.com/cloudwego/kitex/pkg/transmeta"
	"github.com/cloudwego/kitex/server"
	"github.com/cloudwego/kitex/transport"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/common"
	"github.com/sluicehq/sluice/internal/rpcerr"
)

// Defaults for Config and ClientConfig fields left zero.
const (
	// DefaultMaxFrameSize bounds one RPC message. It must hold the largest
	// module upload (64 MiB by default) plus framing.
	DefaultMaxFrameSize = 80 << 20
	// DefaultReadWriteTimeout bounds reading or writing one frame on a
	// connection.
	DefaultReadWriteTimeout = 30 * time.Second
	// DefaultExitWaitTime bounds how long Close waits for in-flight calls.
	DefaultExitWaitTime = 2 * time.Second
	// DefaultRPCTimeout bounds one client call unless the call sets its own
	// (callopt.WithRPCTimeout).
	DefaultRPCTimeout = 10 * time.Second
	// DefaultConnectTimeout bounds dialling a peer.
	DefaultConnectTimeout = 2 * time.Second
)

// Config configures a server. The zero value of every field but Addr means
// its default.
type Config struct {
	// Addr is the address to listen on, host:port; port 0 picks a free port
	// (read it back with Server.Addr). Empty means "127.0.0.1:0".
	Addr string
	// MaxFrameSize is the largest request or response in bytes.
	MaxFrameSize int
	// ReadWriteTimeout bounds network reads and writes of one frame.
	ReadWriteTimeout time.Duration
	// ExitWaitTime bounds how long Close waits for in-flight calls.
	ExitWaitTime time.Duration
	// Logger receives panics and errors; nil means slog.Default().
	Logger *slog.Logger
	// TLS, when set, makes the server speak TLS only: a plaintext client
	// fails its handshake. Build it with tlsconf.Source.ServerConfig, which
	// picks up reloaded certificates per handshake.
	TLS *tls.Config
	// Options are extra Kitex server options, applied last.
	Options []server.Option
}

// Registration registers one service on the server, typically the generated
// RegisterService of a service package bound to its handler.
type Registration func(server.Server) error

// Server is a running Kitex server. Close stops it.
type Server struct {
	ksvr     server.Server
	addr     string
	exit     chan error
	done     chan struct{}
	runErr   error
	ready    *readiness
	closeMu  sync.Once
	tls      *connTracker // nil without TLS
	exitWait time.Duration
}

// Start listens on cfg.Addr, registers every service and serves them until
// Close.
//
// # Errors
//
// A listen error (address in use, bad address) or a registration error
// (for example the same service twice); nothing is left running then.
func Start(ctx context.Context, cfg Config, regs ...Registration) (*Server, error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.MaxFrameSize <= 0 {
		cfg.MaxFrameSize = DefaultMaxFrameSize
	}
	if cfg.ReadWriteTimeout <= 0 {
		cfg.ReadWriteTimeout = DefaultReadWriteTimeout
	}
	if cfg.ExitWaitTime <= 0 {
		cfg.ExitWaitTime = DefaultExitWaitTime
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	s := &Server{
		addr:     ln.Addr().String(),
		exit:     make(chan error, 1),
		done:     make(chan struct{}),
		ready:    &readiness{ch: make(chan struct{})},
		exitWait: cfg.ExitWaitTime,
	}
	opts := []server.Option{
		server.WithCodec(codec.NewDefaultCodecWithSizeLimit(cfg.MaxFrameSize)),
		server.WithPayloadCodec(newBoundedCodec(true)),
		server.WithReadWriteTimeout(cfg.ReadWriteTimeout),
		server.WithExitWaitTime(cfg.ExitWaitTime),
		// Kitex listens for SIGINT/SIGTERM by default; the process decides
		// when its server stops, so only Close does.
		server.WithExitSignal(func() <-chan error { return s.exit }),
		server.WithMiddleware(Recover(log)),
		server.WithBoundHandler(s.ready),
		// Clients speak TTHeader so calls carry metadata (MetaToken,
		// MetaPeer); the server reads it into the handler's context.
		server.WithMetaHandler(transmeta.ServerTTHeaderHandler),
	}
	if cfg.TLS != nil {
		tlsOpts, tr := tlsServerOptions(ln, cfg.TLS)
		opts = append(opts, tlsOpts...)
		s.tls = tr
	} else {
		opts = append(opts, server.WithListener(ln))
	}
	opts = append(opts, cfg.Options...)
	s.ksvr = server.NewServer(opts...)
	for _, reg := range regs {
		if err := register(reg, s.ksvr); err != nil {
			ln.Close()
			return nil, fmt.Errorf("register service: %w", err)
		}
	}
	go func() {
		defer close(s.done)
		s.runErr = s.ksvr.Run()
		if s.runErr != nil {
			log.Error("rpc server stopped", "addr", s.addr, "err", s.runErr)
		}
	}()
	if err := s.awaitServing(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// awaitServing returns once the server's event loop accepts connections.
// Kitex starts it asynchronously, and stopping it before that has happened
// is a data race inside Kitex; it also means Addr takes calls as soon as
// Start returns. The probe is a bare TCP connection that sends nothing; the
// readiness handler sees it become active.
func (s *Server) awaitServing(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", s.addr)
		if err == nil {
			select {
			case <-s.ready.ch:
				c.Close()
				return nil
			case <-time.After(100 * time.Millisecond):
			}
			c.Close()
		}
		select {
		case <-s.ready.ch:
			return nil
		case <-s.done:
			if s.runErr != nil {
				return fmt.Errorf("start rpc server: %w", s.runErr)
			}
			return errors.New("start rpc server: stopped at once")
		case <-ctx.Done():
			return fmt.Errorf("start rpc server on %s: not serving: %w", s.addr, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// readiness is an inbound handler that notes the first connection the event
// loop accepts.
type readiness struct {
	once sync.Once
	ch   chan struct{}
}

func (r *readiness) OnActive(ctx context.Context, _ net.Conn) (context.Context, error) {
	r.once.Do(func() { close(r.ch) })
	return ctx, nil
}
func (r *readiness) OnInactive(ctx context.Context, _ net.Conn) context.Context { return ctx }
func (r *readiness) OnRead(ctx context.Context, _ net.Conn) (context.Context, error) {
	return ctx, nil
}
func (r *readiness) OnMessage(ctx context.Context, _, _ remote.Message) (context.Context, error) {
	return ctx, nil
}

// register calls reg, turning the panic Kitex raises for a bad handler or a
// service registered twice into an error.
func register(reg Registration, s server.Server) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	return reg(s)
}

// Addr returns the address the server is bound to, host:port.
func (s *Server) Addr() string { return s.addr }

// Close stops accepting calls, waits for in-flight calls (up to the exit wait
// time) and returns when the server has stopped. It is safe to call more
// than once.
func (s *Server) Close() error {
	s.closeMu.Do(func() {
		close(s.exit)
		if s.tls != nil {
			s.tls.shutdown(s.exitWait)
			defer close(s.tls.release)
		}
		<-s.done
	})
	<-s.done
	// Run returns the nil a closed exit channel yields on a clean stop.
	return s.runErr
}

// errSetter is implemented by every generated result whose method declares
// `throws (1: common.SluiceError err)`.
type errSetter interface {
	SetErr(*common.SluiceError)
}

// Recover is the server middleware Start installs. A handler that panics
// answers INTERNAL (the panic and stack are logged, not sent); a handler that
// returns an error that is not a *common.SluiceError has it mapped through
// rpcerr, so the caller still gets a typed error instead of an opaque
// transport failure.
func Recover(log *slog.Logger) endpoint.Middleware {
	return func(next endpoint.Endpoint) endpoint.Endpoint {
		return func(ctx context.Context, req, resp any) (err error) {
			defer func() {
				if p := recover(); p != nil {
					method := ""
					if ri := rpcinfo.GetRPCInfo(ctx); ri != nil && ri.Invocation() != nil {
						method = ri.Invocation().MethodName()
					}
					log.Error("rpc handler panic", "method", method, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
					err = rpcerr.Errorf(rpcerr.ErrInternal, "internal error in %s: %v", method, p)
				}
				if err == nil {
					return
				}
				var de *kerrors.DetailedError
				if errors.As(err, &de) && de.ErrorType() == kerrors.ErrBiz && de.Unwrap() != nil {
					err = de.Unwrap() // the handler's own error, without Kitex's "biz error: "
				}
				if errors.Is(err, kerrors.ErrPanic) {
					// Kitex recovered the handler's panic itself (and logged it).
					err = rpcerr.Errorf(rpcerr.ErrInternal, "internal error: %v", err)
				}
				var se *common.SluiceError
				if errors.As(err, &se) {
					return
				}
				if r, ok := resp.(errSetter); ok {
					r.SetErr(ToSluiceError(err))
					err = nil
				}
			}()
			return next(ctx, req, resp)
		}
	}
}

// ClientConfig configures the client side of a connection to a Server.
type ClientConfig struct {
	MaxFrameSize   int           // 0 means DefaultMaxFrameSize
	RPCTimeout     time.Duration // 0 means DefaultRPCTimeout
	ConnectTimeout time.Duration // 0 means DefaultConnectTimeout
	// Metadata is sent in the TTHeader of every call (MetaToken, MetaPeer);
	// the server reads it with Incoming.
	Metadata map[string]string
	// TLS, when set, makes every connection TLS: it returns the tls.Config
	// of one connection to a server that must prove serverName (the host
	// of the address dialled), as tlsconf.Source.ClientConfig does. It is
	// called per connection, so reloaded files take effect on the next.
	// Nil means plaintext.
	TLS func(serverName string) *tls.Config
}

// ClientOptions returns the Kitex client options for calling the server at
// addr with cfg: the same frame size limit as the server, timeouts, and the
// TTHeader transport that carries cfg.Metadata. Pass them to a generated
// NewClient.
func ClientOptions(addr string, cfg ClientConfig) []client.Option {
	cfg = cfg.withDefaults()
	return append(baseClientOptions(addr, cfg), client.WithRPCTimeout(cfg.RPCTimeout))
}

// IntervalClientOptions are ClientOptions for a client that calls at an
// interval while the process is otherwise idle (TaskManager registration
// and heartbeats). Kitex runs every call whose context has a Done channel,
// or that has an RPC timeout, on a process-wide worker pool whose ticker
// fires every 47 ms until a minute after the last such call: with a
// heartbeat a second, an idle process would never sleep. These clients
// bound a call by cfg.RPCTimeout as a read timeout on the connection,
// set inside the call chain where that pool does not see it.
//
// # Notes
//
// Callers pass their context through Detach: the call then ends by its
// answer, a connection error or the read timeout (the context's deadline
// if it is sooner than cfg.RPCTimeout), not by cancelling the context.
func IntervalClientOptions(addr string, cfg ClientConfig) []client.Option {
	cfg = cfg.withDefaults()
	return append(baseClientOptions(addr, cfg), client.WithMiddleware(readTimeout(cfg.RPCTimeout)))
}

func (cfg ClientConfig) withDefaults() ClientConfig {
	if cfg.MaxFrameSize <= 0 {
		cfg.MaxFrameSize = DefaultMaxFrameSize
	}
	if cfg.RPCTimeout <= 0 {
		cfg.RPCTimeout = DefaultRPCTimeout
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	return cfg
}

func baseClientOptions(addr string, cfg ClientConfig) []client.Option {
	opts := []client.Option{
		client.WithHostPorts(addr),
		client.WithCodec(codec.NewDefaultCodecWithSizeLimit(cfg.MaxFrameSize)),
		client.WithPayloadCodec(newBoundedCodec(false)),
		client.WithConnectTimeout(cfg.ConnectTimeout),
		client.WithTransportProtocol(transport.TTHeader),
		client.WithMetaHandler(transmeta.ClientTTHeaderHandler),
		client.WithMiddleware(withMetadata(maps.Clone(cfg.Metadata))),
	}
	if cfg.TLS != nil {
		opts = append(opts, tlsClientOptions(cfg.TLS)...)
	}
	return opts
}

// readTimeout sets the call's RPC timeout (d, or the Detach'ed deadline
// if sooner) after Kitex's timeout middleware has run (customized
// middlewares run inside it), so the transport sets it as the connection's
// read timeout and no pool worker waits for it.
func readTimeout(d time.Duration) endpoint.Middleware {
	return func(next endpoint.Endpoint) endpoint.Endpoint {
		return func(ctx context.Context, req, resp any) error {
			d := d
			if dl, ok := ctx.Value(detachedDeadline{}).(time.Time); ok {
				left := time.Until(dl)
				if left <= 0 {
					return context.DeadlineExceeded
				}
				d = min(d, left)
			}
			if ri := rpcinfo.GetRPCInfo(ctx); ri != nil {
				if cfg := rpcinfo.AsMutableRPCConfig(ri.Config()); cfg != nil {
					if err := cfg.SetRPCTimeout(d); err != nil {
						return fmt.Errorf("set read timeout: %w", err)
					}
				}
			}
			return next(ctx, req, resp)
		}
	}
}

type detachedDeadline struct{}

// Detach returns ctx without its cancellation, for a call through a client
// made with IntervalClientOptions; its deadline, if any, still bounds the
// call as a read timeout.
func Detach(ctx context.Context) context.Context {
	out := context.WithoutCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		out = context.WithValue(out, detachedDeadline{}, dl)
	}
	return out
}
