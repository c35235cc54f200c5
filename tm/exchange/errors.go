package exchange

import "errors"

// peerFailures are the errors by which a task learns that something else
// failed: the task on the other end of a channel, or the TaskManager it
// runs on.
var peerFailures = []error{ErrProducerAborted, ErrChannelClosed, ErrConnectionLost, ErrConsumerNotFound}

// IsPeerFailure reports whether err is how the exchange tells a task of a
// failure elsewhere: a producer aborted its channel (ErrProducerAborted),
// a consumer closed its input (ErrChannelClosed), the connection to
// another TaskManager broke (ErrConnectionLost), or a consumer never
// opened its input (ErrConsumerNotFound). Such an error is a consequence:
// the root cause is the other task's failure (or its TaskManager's loss),
// which that task reports itself.
//
// The errors a task's own records raise (ErrNoKey, ErrRecordTooLarge) and
// those of a misconfigured cluster (ErrHandshake) are causes, as is
// anything else.
func IsPeerFailure(err error) bool {
	for _, p := range peerFailures {
		if errors.Is(err, p) {
			return true
		}
	}
	return false
}
