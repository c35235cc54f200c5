package rest

import (
	"context"
	"strings"

	"github.com/sluicehq/sluice/jm/dispatcher"
)

// Routes lists every route of the API as "METHOD /pattern", for the tests
// that must cover each one.
func Routes() []string {
	s, err := New(Config{Dispatcher: (*dispatcher.Dispatcher)(nil), Authenticate: func(context.Context, string) (string, error) { return "", nil }})
	if err != nil {
		panic(err)
	}
	var out []string
	for _, rt := range s.routes {
		for m := range rt.methods {
			out = append(out, m+" /"+strings.Join(rt.segs, "/"))
		}
	}
	return out
}
