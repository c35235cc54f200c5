// Package rest serves the JobManager's REST API: Flink's paths and JSON
// shapes (/overview, /jobs/:id, /jobs/:id/checkpoints, /taskmanagers, …)
// over the Dispatcher and the ResourceManager, with module upload, list
// and run in place of Flink's /jars. docs/REST.md lists every route.
//
// Every request is authenticated the way a Kitex call is: the bearer token
// of its Authorization header goes through the one client check the Kitex
// endpoints use (Config.Authenticate is jm/rpc's Auth.ClientToken), and a
// tenant sees only its own jobs and modules. Errors are Flink's
// {"errors": [message]} with the Dispatcher's message and an HTTP status
// from the error's code (statusOf).
//
// It must not import jm/rpc or anything of Kitex (internal/check); the
// dashboard's assets (package jm/rest/web) are mounted through
// Config.Web.
package rest
