package jobgraph

import (
	"fmt"
	"strings"
)

// ConfigPoisonRecords (any guest operator) overrides the job's poison-record
// policy (the job config key pipeline.poison-records) for the chain the
// operator runs in; its value is a PoisonPolicy.
const ConfigPoisonRecords = "poison-records"

// PoisonPolicy is what a task does with a record whose processing trapped
// the guest (or made it report an error).
type PoisonPolicy string

// Poison-record policies.
const (
	// PoisonFail fails the task, naming the record's position; the job
	// restarts as its restart strategy says. The default.
	PoisonFail PoisonPolicy = "fail"
	// PoisonSkip drops the record, counts it and goes on.
	PoisonSkip PoisonPolicy = "skip"
	// PoisonDeadLetter drops the record from the stream and writes it,
	// with its trap, to the job's dead-letter files.
	PoisonDeadLetter PoisonPolicy = "dead-letter"
)

// PoisonPolicies lists the policies for error messages.
const PoisonPolicies = "fail, skip or dead-letter"

// ParsePoisonPolicy reads a policy as a user spells it (any case).
//
// # Errors
//
// An error naming s and the policies when s is none of them.
func ParsePoisonPolicy(s string) (PoisonPolicy, error) {
	for _, p := range []PoisonPolicy{PoisonFail, PoisonSkip, PoisonDeadLetter} {
		if strings.EqualFold(s, string(p)) {
			return p, nil
		}
	}
	return "", fmt.Errorf("poison-record policy %q: want %s", s, PoisonPolicies)
}

// strictness orders the policies: a chain whose operators disagree takes
// the strictest.
func (p PoisonPolicy) strictness() int {
	switch p {
	case PoisonSkip:
		return 1
	case PoisonDeadLetter:
		return 2
	default:
		return 3
	}
}

// ChainPoisonPolicy is the policy of a task running chain: the strictest
// of the overrides its operators set (ConfigPoisonRecords), or job, the
// job's policy, when none sets one. Values Validate refused count as
// PoisonFail.
func ChainPoisonPolicy(chain []Vertex, job PoisonPolicy) PoisonPolicy {
	var got PoisonPolicy
	for i := range chain {
		s, ok := chain[i].Config[ConfigPoisonRecords]
		if !ok || chain[i].Connector != "" {
			continue
		}
		p, err := ParsePoisonPolicy(s)
		if err != nil {
			p = PoisonFail
		}
		if got == "" || p.strictness() > got.strictness() {
			got = p
		}
	}
	if got == "" {
		if job == "" {
			return PoisonFail
		}
		return job
	}
	return got
}
