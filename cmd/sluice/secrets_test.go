package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadJobSecrets(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	lf, crlf, bare, two, empty := write("lf", "s3cret\n"), write("crlf", "s3cret\r\n"), write("bare", "s3cret"), write("two", "s3cret\n\n"), write("empty", "\n")
	for _, tc := range []struct {
		specs  []string
		config map[string]string
		want   map[string]string
		err    string
	}{
		{specs: []string{"kafka=" + lf}, want: map[string]string{"secret.kafka": "s3cret"}},
		{specs: []string{"a=" + crlf, "b=" + bare}, want: map[string]string{"secret.a": "s3cret", "secret.b": "s3cret"}},
		{specs: []string{"a=" + two}, want: map[string]string{"secret.a": "s3cret\n"}}, // only the final line end goes
		{specs: []string{"a"}, err: `--job-secret "a": want NAME=FILE`},
		{specs: []string{"=" + lf}, err: "want NAME=FILE"},
		{specs: []string{"a/b=" + lf}, err: `the secret's name has '/' at byte 1`},
		{specs: []string{"a=" + filepath.Join(dir, "missing")}, err: "no such file"},
		{specs: []string{"a=" + empty}, err: "is empty: put the secret in it"},
		{specs: []string{"a=" + lf, "a=" + bare}, err: `secret "a" is already set`},
		{specs: []string{"a=" + lf}, config: map[string]string{"secret.a": "x"}, err: "already set (by --config secret.a"},
	} {
		config := map[string]string{}
		for k, v := range tc.config {
			config[k] = v
		}
		err := readJobSecrets(tc.specs, config)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error containing %q", tc.specs, err, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%q: the error shows the secret: %v", tc.specs, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.specs, err)
			continue
		}
		if len(config) != len(tc.want) {
			t.Errorf("%q: config %q, want %q", tc.specs, config, tc.want)
		}
		for k, v := range tc.want {
			if config[k] != v {
				t.Errorf("%q: config[%s] = %q, want %q", tc.specs, k, config[k], v)
			}
		}
	}
}
