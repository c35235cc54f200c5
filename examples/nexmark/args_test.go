//go:build !wasip1

package main

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/sdk/guest"
)

func TestParseArgs(t *testing.T) {
	o, err := parseArgs([]string{"--query", "q2", "--sink=blackhole", "--events", "0", "--rate", "5000", "--seed", "9", "--base-time", "1700000000000", "--out-of-order", "4", "--text"})
	if err != nil {
		t.Fatal(err)
	}
	want := options{query: "q2", sink: "blackhole", text: true, source: guest.NexmarkOptions{Events: 0, Rate: 5000, Seed: 9, BaseTime: 1700000000000, OutOfOrderGroup: 4}}
	if o != want {
		t.Fatalf("%+v, want %+v", o, want)
	}
	if o, err := parseArgs([]string{"--query", "q5", "--text", "--out", "nx/q5"}); err != nil || o.out != "nx/q5" || !o.text {
		t.Fatalf("--out: %+v, %v", o, err)
	}
	for args, msg := range map[string]string{
		"--query q6":     "this example has q0, q1, q2, q3, q4, q5, q7 and q8",
		"--sink kafka":   "collect or blackhole",
		"--events -1":    `--events "-1": want a non-negative integer`,
		"--seed x":       `--seed "x"`,
		"--frobnicate 1": `unknown argument "--frobnicate"`,
		"--rate":         "--rate needs a value",
		"--out x":        "--out writes lines of text: add --text",
	} {
		_, err := parseArgs(strings.Fields(args))
		if err == nil || !strings.Contains(err.Error(), msg) || !strings.Contains(err.Error(), "usage: nexmark") {
			t.Errorf("%s: %v, want %q and the usage", args, err, msg)
		}
	}
}
