//go:build !wasip1

package guest

import (
	"testing"
	"time"
)

// Bad joins fail the plan, saying what is wrong.
func TestJoinPlanMisuse(t *testing.T) {
	key := func(r Record) []byte { return r.Key }
	pair := func(l, r Record, out *Collector) {}
	src := func(env *Env, name string) *Stream {
		return env.Source(name, func(*Context, int, *Collector) bool { return true })
	}
	for name, tc := range map[string]struct {
		plan func(env *Env)
		want string
	}{
		"nil other": {func(env *Env) {
			src(env, "a").Join(nil, key, key).Window(Tumbling(time.Second)).Apply("j", pair).Collect("o")
		}, "the other stream is nil"},
		"nil key": {func(env *Env) {
			src(env, "a").Join(src(env, "b"), key, nil).Window(Tumbling(time.Second)).Apply("j", pair).Collect("o")
		}, `Join of "a" and "b": nil key function`},
		"session": {func(env *Env) {
			src(env, "a").Join(src(env, "b"), key, key).Window(Session(time.Second)).Apply("j", pair).Collect("o")
		}, "a join takes tumbling or sliding windows"},
		"bad window": {func(env *Env) {
			src(env, "a").Join(src(env, "b"), key, key).Window(Tumbling(0)).Apply("j", pair).Collect("o")
		}, "Tumbling(0s): the size must be at least 1ms"},
		"nil fn": {func(env *Env) {
			src(env, "a").Join(src(env, "b"), key, key).Window(Tumbling(time.Second)).Apply("j", nil).Collect("o")
		}, `process "j": nil function`},
		"late output": {func(env *Env) {
			j := src(env, "a").Join(src(env, "b"), key, key).Window(Tumbling(time.Second)).Apply("j", pair)
			j.Collect("o")
			j.Late("l").Collect("lo")
		}, `a join has no late output: it counts its late records in "j.late"`},
		"interval bounds": {func(env *Env) {
			src(env, "a").Join(src(env, "b"), key, key).Between(time.Second, -time.Second).Process("j", pair).Collect("o")
		}, "Join.Between(1s, -1s): the lower bound is above the upper one"},
		"interval timer": {func(env *Env) {
			src(env, "a").Join(src(env, "b"), key, key).Between(-time.Second, time.Second).Process("j", pair).
				OnEventTimer(func(*KeyedContext, int64, *Collector) {}).Collect("o")
		}, `OnEventTimer on "j": an interval join's timers are its own`},
		"interval nil fn": {func(env *Env) {
			src(env, "a").Join(src(env, "b"), key, key).Between(-time.Second, time.Second).Process("j", nil).Collect("o")
		}, `process "j": nil function`},
		"a sink": {func(env *Env) {
			a := src(env, "a")
			a.Join(src(env, "b").Collect("s"), key, key).Window(Tumbling(time.Second)).Apply("j", pair).Collect("o")
		}, `reads sink "s"`},
	} {
		t.Run(name, func(t *testing.T) { planFails(t, tc.plan, tc.want) })
	}
}
