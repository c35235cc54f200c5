// Command slowwc is the word count (as `tr -cs 'A-Za-z' '\n' | tr A-Z a-z |
// sort | uniq -c`) with a deliberate CPU cost per line, so a test can kill a
// TaskManager while the job is still running.
//
//	--input PATH   a text input (repeatable)
//	--spin N       rounds of busy work per line (default 0)
package main

import (
	"strconv"

	"github.com/sluicehq/sluice/sdk/guest"
)

func init() {
	guest.Job(func(env *guest.Env) {
		var paths []string
		spin := 0
		args := env.Args()
		for i := 0; i < len(args); i++ {
			switch args[i] {
			case "--input":
				if i+1 < len(args) {
					paths = append(paths, args[i+1])
					i++
				}
			case "--spin":
				if i+1 < len(args) {
					spin, _ = strconv.Atoi(args[i+1])
					i++
				}
			}
		}
		env.TextSource("lines", paths...).
			FlatMap("tokenize", func(r guest.Record, out *guest.Collector) {
				burn(r.Value, spin)
				tokenize(r.Value, out)
			}).
			KeyBy("word", func(r guest.Record) []byte { return r.Value }).
			Reduce("count", func(acc []byte, _ guest.Record) []byte {
				return guest.PutInt64(acc, guest.AsInt64(acc)+1)
			}, guest.EmitFinal()).
			Map("format", func(r guest.Record) guest.Record {
				v := append(append(append([]byte(nil), r.Key...), '\t'), strconv.FormatInt(guest.AsInt64(r.Value), 10)...)
				return guest.Record{Value: v}
			}).
			Collect("out")
	})
}

var sink uint32

//go:noinline
func burn(b []byte, rounds int) {
	h := uint32(2166136261)
	for range rounds {
		for _, c := range b {
			h = (h ^ uint32(c)) * 16777619
		}
	}
	sink += h
}

func tokenize(line []byte, out *guest.Collector) {
	var word []byte
	for i := 0; i <= len(line); i++ {
		var c byte
		if i < len(line) {
			c = line[i]
		}
		switch {
		case c >= 'a' && c <= 'z':
			word = append(word, c)
		case c >= 'A' && c <= 'Z':
			word = append(word, c+'a'-'A')
		default:
			if len(word) > 0 {
				out.EmitValue(word)
				word = word[:0]
			}
		}
	}
}

func main() {}
