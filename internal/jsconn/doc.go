// Package jsconn connects to NATS JetStream with a connector's settings
// (jobgraph.JetStreamSettings) and checks, at submit time, what a job's
// JetStream connectors name: that a server answers, that a source's stream
// exists and that a sink's subject is bound to a stream. It is shared by
// the TaskManager's connectors (tm/task) and the Dispatcher (jm/dispatcher).
//
// It must not import jm, tm or local. Its errors never hold a secret: the
// settings' URLs carry no credentials (jobgraph rejects them) and the
// token and password are only handed to the client library.
package jsconn
