//go:build tools

// Package tools pins the code generators this module runs with `go run`.
package tools

import (
	_ "github.com/cloudwego/kitex/tool/cmd/kitex"
)
