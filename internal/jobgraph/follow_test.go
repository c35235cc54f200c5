package jobgraph

import (
	"strings"
	"testing"
	"time"
)

// TestMonitorInterval: the host reads a text source's monitor interval
// (the key a C guest writes) and refuses one below the minimum or not a
// whole number of milliseconds, naming the minimum.
func TestMonitorInterval(t *testing.T) {
	for _, tc := range []struct {
		val    string
		set    bool
		want   time.Duration
		follow bool
		bad    bool
	}{
		{set: false},
		{val: "100", set: true, want: 100 * time.Millisecond, follow: true},
		{val: "60000", set: true, want: time.Minute, follow: true},
		{val: "99", set: true, bad: true},
		{val: "0", set: true, bad: true},
		{val: "-5", set: true, bad: true},
		{val: "1s", set: true, bad: true},
		{val: "", set: true, bad: true},
		{val: "99999999999999999999", set: true, bad: true},
	} {
		v := Vertex{Config: map[string]string{}}
		if tc.set {
			v.Config[ConfigMonitorInterval] = tc.val
		}
		d, ok, err := v.MonitorInterval()
		if tc.bad {
			if err == nil || !strings.Contains(err.Error(), "at least 100") {
				t.Errorf("%q: %v %v %v, want an error naming the minimum", tc.val, d, ok, err)
			}
			continue
		}
		if err != nil || ok != tc.follow || d != tc.want {
			t.Errorf("%q: %v %v %v, want %v %v", tc.val, d, ok, err, tc.want, tc.follow)
		}
	}
	var v Vertex
	v.SetMonitorInterval(2 * time.Second)
	if d, ok, err := v.MonitorInterval(); d != 2*time.Second || !ok || err != nil {
		t.Errorf("set 2s, read %v %v %v", d, ok, err)
	}
}
