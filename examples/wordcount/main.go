// Command wordcount counts the words of text files: the classic first
// dataflow job, written with the typed Go SDK (sdk/guest/typed). Words are
// maximal runs of ASCII letters, lower-cased; the result is one
// "word<TAB>count" line per distinct word. examples/wordcount-bytes is the
// same job written with the byte-level SDK.
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
	"github.com/sluicehq/sluice/sdk/guest/typed"
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

	lines := typed.TextLines(env, "lines", inputs...)
	words := typed.FlatMap(lines, "tokenize", typed.String(), tokenizer())
	byWord := typed.KeyByValue(words, "word")
	counts := typed.Count(byWord, "count", guest.EmitFinal())
	typed.Format(counts, "format", func(line []byte, c typed.KV[string, int64]) []byte {
		return strconv.AppendInt(append(append(line, c.Key...), '\t'), c.Value, 10)
	}).Collect("out")
}

// tokenizer returns the tokenize function: it emits each maximal run of
// ASCII letters of a line, lower-cased. A word in lower case already is
// emitted as a slice of the line, and one with capitals is lower-cased
// into a buffer reused for every word (the SDK copies what is emitted), so
// no word costs an allocation.
func tokenizer() func(line string, out *typed.Emitter[string]) {
	var buf []byte
	return func(line string, out *typed.Emitter[string]) {
		i := 0
		for {
			for i < len(line) && lower[line[i]] == 0 {
				i++
			}
			if i == len(line) {
				return
			}
			start, upper := i, false
			for i < len(line) {
				c := line[i]
				l := lower[c]
				if l == 0 {
					break
				}
				upper = upper || l != c
				i++
			}
			if !upper {
				out.Emit(line[start:i])
				continue
			}
			buf = buf[:0]
			for j := start; j < i; j++ {
				buf = append(buf, lower[line[j]])
			}
			typed.EmitText(out, buf)
		}
	}
}

// lower maps each ASCII letter to its lower case and every other byte to
// 0: one table lookup per byte is the cheapest test in Wasm, where every
// branch costs.
var lower = func() (t [256]byte) {
	for c := byte('a'); c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = c, c
	}
	return t
}()

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
			return nil, fmt.Errorf("unknown argument %s: wordcount takes --input PATH (repeatable)", a)
		}
	}
	if len(inputs) == 0 {
		return nil, errors.New("no input: pass -- --input PATH")
	}
	return inputs, nil
}
