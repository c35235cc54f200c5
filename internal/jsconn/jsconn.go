package jsconn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice/internal/jobgraph"
)

// ConnectTimeout bounds one connection attempt.
const ConnectTimeout = 5 * time.Second

// Connect dials the settings' servers. The connection does not retry on
// its own after it is lost for good (the task fails and its job's restart
// strategy applies); a short outage is bridged by the client's reconnects.
//
// # Errors
//
// An error naming the servers (never a secret) when none answers.
func Connect(ctx context.Context, s jobgraph.JetStreamSettings, name string) (*nats.Conn, jetstream.JetStream, error) {
	opts := []nats.Option{
		nats.Name(name),
		nats.Timeout(ConnectTimeout),
		nats.MaxReconnects(30),
		nats.ReconnectWait(200 * time.Millisecond),
		nats.NoCallbacksAfterClientClose(),
	}
	switch {
	case s.Token != "":
		opts = append(opts, nats.Token(s.Token))
	case s.User != "":
		opts = append(opts, nats.UserInfo(s.User, s.Password))
	}
	servers := strings.Join(s.URLs, ",")
	type result struct {
		nc  *nats.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		nc, err := nats.Connect(servers, opts...)
		ch <- result{nc, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.nc != nil {
				r.nc.Close()
			}
		}()
		return nil, nil, ctx.Err()
	}
	if r.err != nil {
		return nil, nil, fmt.Errorf("connect to NATS at %s: %w; check that the server runs and the address is right", servers, redact(r.err, s))
	}
	js, err := jetstream.New(r.nc)
	if err != nil {
		r.nc.Close()
		return nil, nil, fmt.Errorf("jetstream at %s: %w", servers, redact(err, s))
	}
	return r.nc, js, nil
}

// Check connects with a vertex's settings and checks what it names: a
// source's stream exists; a sink's subject is bound to a stream (with the
// stream's duplicate window, the limit on exactly-once replays, returned);
// then it disconnects.
//
// # Errors
//
// An error saying what is wrong and what to do: no server answers, no such
// stream, no stream for the sink's subject.
func Check(ctx context.Context, v *jobgraph.Vertex) (dupWindow time.Duration, err error) {
	s, err := v.JetStream()
	if err != nil {
		return 0, err
	}
	nc, js, err := Connect(ctx, s, "sluice-submit-check")
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	if v.Connector == jobgraph.ConnectorJetStreamSource {
		if _, err := js.Stream(ctx, s.Stream); err != nil {
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				return 0, fmt.Errorf("jetstream source: stream %q does not exist on %s: create it, or name an existing stream", s.Stream, nc.ConnectedUrlRedacted())
			}
			return 0, fmt.Errorf("jetstream source: stream %q: %w", s.Stream, redact(err, s))
		}
		return 0, nil
	}
	name, err := js.StreamNameBySubject(ctx, s.Subject)
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return 0, fmt.Errorf("jetstream sink: no stream on %s stores subject %q: create a stream whose subjects include it", nc.ConnectedUrlRedacted(), s.Subject)
		}
		return 0, fmt.Errorf("jetstream sink: subject %q: %w", s.Subject, redact(err, s))
	}
	st, err := js.Stream(ctx, name)
	if err != nil {
		return 0, fmt.Errorf("jetstream sink: stream %q: %w", name, redact(err, s))
	}
	return st.CachedInfo().Config.Duplicates, nil
}

// MsgID is the Nats-Msg-Id of the seq-th record (from 0) that subtask of
// job's sink vertex held for checkpoint: the same record gets the same id
// when it is published again after a restore, so the server drops the
// copy within the stream's duplicate window.
func MsgID(job string, vertex int, checkpoint int64, subtask, seq int) string {
	return fmt.Sprintf("%s-v%d-c%d-s%d-%d", job, vertex, checkpoint, subtask, seq)
}

// redactedErr is an error whose text has had the settings' secrets cut
// out, keeping the original for errors.Is.
type redactedErr struct {
	msg string
	err error
}

func (e *redactedErr) Error() string { return e.msg }
func (e *redactedErr) Unwrap() error { return e.err }

func redact(err error, s jobgraph.JetStreamSettings) error {
	msg := err.Error()
	for _, sec := range []string{s.Token, s.Password} {
		if len(sec) >= 1 {
			msg = strings.ReplaceAll(msg, sec, "[redacted]")
		}
	}
	return &redactedErr{msg: msg, err: err}
}
