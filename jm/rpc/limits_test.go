package rpc

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/dispatcher"
	"github.com/sluicehq/sluice/internal/rpcerr"
)

func TestCheckSubmission(t *testing.T) {
	name := func(n int) *string { s := strings.Repeat("n", n); return &s }
	for _, tc := range []struct {
		name string
		req  *dispatcher.SubmitJobRequest
		ok   bool
	}{
		{"empty", &dispatcher.SubmitJobRequest{}, true},
		{"at the bounds", &dispatcher.SubmitJobRequest{Args_: make([]string, MaxArgs), Name: name(MaxNameBytes)}, true},
		{"too many args", &dispatcher.SubmitJobRequest{Args_: make([]string, MaxArgs+1)}, false},
		{"args too long", &dispatcher.SubmitJobRequest{Args_: []string{strings.Repeat("a", MaxArgsBytes+1)}}, false},
		{"config too long", &dispatcher.SubmitJobRequest{Config: map[string]string{"k": strings.Repeat("v", MaxConfigBytes)}}, false},
		{"name too long", &dispatcher.SubmitJobRequest{Name: name(MaxNameBytes + 1)}, false},
	} {
		err := checkSubmission(tc.req)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, rpcerr.ErrInvalidArgument)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
