package jobmaster

// A job's failures are kept as history: a FINISHED job that recovered
// from two failures shows "restarts 2" and both causes with their times,
// but no current failure. Failure is only what the job is failing from
// now (FAILING, RESTARTING) or what failed it (FAILED).

// noteFailure records a failure of the attempt in the history, keeping
// the last MaxHistory.
func (jm *JobMaster) noteFailure(cause string) {
	jm.history = append(jm.history, FailureRecord{Time: jm.cfg.Now(), Cause: cause})
	if n := len(jm.history) - MaxHistory; n > 0 {
		jm.history = append(jm.history[:0:0], jm.history[n:]...)
	}
}

// currentFailure is the failure Details shows: the root cause while the
// job fails, restarts, or has FAILED; none once it runs again, finished or
// was canceled (the history keeps it).
func (jm *JobMaster) currentFailure() string {
	switch jm.state {
	case Failing, Restarting, Failed:
		return jm.failure
	}
	return ""
}

// historyCause replaces the cause of the newest failure in the history:
// the root cause found after a consequence was recorded.
func (jm *JobMaster) historyCause(cause string) {
	if n := len(jm.history); n > 0 {
		jm.history[n-1].Cause = cause
	}
}
