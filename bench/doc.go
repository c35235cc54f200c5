// Package bench holds whole-cluster benchmarks: jobs run on an embedded
// cluster (real Kitex over loopback, real data port, real wazero), each
// reported as a ratio against a native-Go baseline measured in the same run.
//
//	go test -run '^$' -bench . -benchtime 3x ./bench
package bench
