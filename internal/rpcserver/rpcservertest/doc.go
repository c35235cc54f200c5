// Package rpcservertest holds test helpers for packages that run Kitex
// servers or clients. Only tests import it.
package rpcservertest
