package rpcservertest

import "go.uber.org/goleak"

// LeakOptions are the goleak options for packages that run Kitex servers or
// clients. Kitex and netpoll start process-wide goroutines that live as long
// as the process by design: the netpoll pollers, the shared tickers, one
// load-balancer cache watcher per resolver (per peer address with
// WithHostPorts), the client timeout pool and the gopool workers. Everything
// Sluice starts itself must still stop.
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(m, rpcservertest.LeakOptions()...) }
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/cloudwego/netpoll.(*defaultPoll).Wait"),
		goleak.IgnoreAnyFunction("github.com/cloudwego/kitex/pkg/utils.(*SharedTicker).Tick"),
		goleak.IgnoreAnyFunction("github.com/cloudwego/kitex/pkg/loadbalance/lbcache.(*BalancerFactory).watcher"),
		goleak.IgnoreAnyFunction("github.com/cloudwego/kitex/client.(*timeoutPool).createTicker.func1"),
		goleak.IgnoreAnyFunction("github.com/cloudwego/kitex/client.(*timeoutPool).createWorker.func1"),
		goleak.IgnoreAnyFunction("github.com/bytedance/gopkg/util/gopool.(*worker).run.func1"),
		goleak.IgnoreAnyFunction("github.com/cloudwego/kitex/internal/wpool.(*Pool).createWorker.func1"),
	}
}
