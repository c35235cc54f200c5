// Package rpcserver runs one Kitex server that serves several services on one
// listener, as every Sluice process does (DESIGN.md §1), and builds the
// matching client options. It owns the defaults both sides share: the frame
// size limit, timeouts, and a middleware that turns handler panics and stray
// errors into common.SluiceError values. It is also the wire side of
// internal/rpcerr's table (errors.go): ToWire in handlers, FromCall in
// clients, Kitex's transport errors classified there. Only RPC adapters
// (jm/rpc, tm/rpc, sdk/client) and process wiring import it; it must not
// import jm, tm or wasmhost.
//
// With Config.TLS and ClientConfig.TLS both sides speak TLS (tls.go); Kitex
// then runs on its Go-net transport instead of netpoll, which cannot carry
// TLS, and the server closes its own listener and connections on Close.
//
//	srv, err := rpcserver.Start(ctx, rpcserver.Config{Addr: "127.0.0.1:0"},
//		func(s server.Server) error { return resourcemanager.RegisterService(s, rmHandler) },
//		func(s server.Server) error { return dispatcher.RegisterService(s, dispHandler) },
//	)
//	defer srv.Close()
//	addr := srv.Addr() // the bound host:port, also for port 0
package rpcserver
