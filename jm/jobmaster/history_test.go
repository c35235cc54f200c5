package jobmaster

import (
	"fmt"
	"testing"
	"time"
)

func TestHistoryKeepsTheLastFailures(t *testing.T) {
	at := time.Unix(1000, 0)
	jm := &JobMaster{cfg: Config{Now: func() time.Time { return at }}}
	for i := range MaxHistory + 3 {
		jm.noteFailure(fmt.Sprint("cause ", i))
	}
	if len(jm.history) != MaxHistory || jm.history[0].Cause != "cause 3" || jm.history[MaxHistory-1].Cause != fmt.Sprint("cause ", MaxHistory+2) {
		t.Fatalf("history %+v", jm.history)
	}
	jm.historyCause("the root cause")
	if c := jm.history[MaxHistory-1].Cause; c != "the root cause" {
		t.Fatalf("newest cause %q after the root cause was found", c)
	}
	for state, shown := range map[JobState]bool{Running: false, Failing: true, Restarting: true, Failed: true, Finished: false, Canceled: false, Cancelling: false} {
		jm.state, jm.failure = state, "boom"
		if got := jm.currentFailure(); (got == "boom") != shown {
			t.Errorf("%s: failure shown %q, want shown %v", state, got, shown)
		}
	}
}
