// Command wordcount-bytes counts the words of text files, written with the
// byte-level Go SDK (sdk/guest): the same job as examples/wordcount, which
// uses the typed SDK, with every record's key and value handled as bytes.
// Words are maximal runs of ASCII letters, lower-cased; the result is one
// "word<TAB>count" record per distinct word. The benchmarks compare the two.
//
// Build it for the cluster with GOOS=wasip1 GOARCH=wasm go build
// -buildmode=c-shared (sluice run and sluice plan do that for you), and pass
// the input with `-- --input PATH` (repeatable; a glob pattern is fine).
package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/sdk/guest"
)

func init() { guest.Job(plan) }

func main() {}

func plan(env *guest.Env) {
	inputs, err := parseArgs(env.Args())
	if err != nil {
		env.Fail(err)
		return
	}
	env.SetName("wordcount")
	env.TextSource("lines", inputs...).
		FlatMap("tokenize", tokenize).
		KeyBy("word", func(r guest.Record) []byte { return r.Value }).
		Reduce("count", count, guest.EmitFinal()).
		Map("format", format).
		Collect("out")
}

// letters maps each ASCII letter to its lower case and every other byte to
// 0: one table lookup per byte is the cheapest test in wasm, where every
// branch and comparison costs.
var letters = func() (t [256]byte) {
	for c := byte('a'); c <= 'z'; c++ {
		t[c] = c
		t[c-'a'+'A'] = c
	}
	return t
}()

// lower is tokenize's scratch buffer for words that need lower-casing:
// records are copied as they are emitted, so one buffer serves every word.
var lower []byte

// tokenize emits each maximal run of ASCII letters of a line, lower-cased.
// A word already in lower case is emitted straight from the line, without
// a copy.
func tokenize(r guest.Record, out *guest.Collector) {
	b := r.Value
	i := 0
	for {
		for i < len(b) && letters[b[i]] == 0 {
			i++
		}
		if i == len(b) {
			return
		}
		start, upper := i, false
		for i < len(b) {
			c := b[i]
			l := letters[c]
			if l == 0 {
				break
			}
			upper = upper || l != c
			i++
		}
		w := b[start:i]
		if upper {
			lower = lower[:0]
			for _, c := range w {
				lower = append(lower, letters[c])
			}
			w = lower
		}
		out.EmitValue(w)
	}
}

// count adds one to the word's count.
func count(acc []byte, _ guest.Record) []byte {
	return guest.PutInt64(acc, guest.AsInt64(acc)+1)
}

var line []byte

// format turns {word, count} into "word<TAB>count".
func format(r guest.Record) guest.Record {
	line = append(append(line[:0], r.Key...), '\t')
	line = strconv.AppendInt(line, guest.AsInt64(r.Value), 10)
	return guest.Record{Value: line}
}

// parseArgs reads the job's arguments: --input PATH, repeatable.
func parseArgs(args []string) ([]string, error) {
	var inputs []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--input" || a == "-input":
			if i+1 == len(args) {
				return nil, errors.New("--input needs a value: pass -- --input PATH")
			}
			i++
			inputs = append(inputs, args[i])
		case strings.HasPrefix(a, "--input="):
			inputs = append(inputs, strings.TrimPrefix(a, "--input="))
		default:
			return nil, fmt.Errorf("unknown argument %s: wordcount-bytes takes --input PATH (repeatable)", a)
		}
	}
	if len(inputs) == 0 {
		return nil, errors.New("no input: pass -- --input PATH")
	}
	return inputs, nil
}
