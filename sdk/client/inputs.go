package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bytedance/sonic"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/jobconfig"
)

// DefaultTenant is the tenant of a cluster without tenant tokens.
const DefaultTenant = "default"

// InputFlag is the job argument whose value names an input; StageInputs
// uploads local files named by it.
const InputFlag = "--input"

// HasLocalInputs reports whether args name a local file, directory or glob
// of files after --input.
func HasLocalInputs(args []string) bool {
	for i := range args {
		if v, ok := inputValue(args, i); ok && len(localFiles(v)) > 0 {
			return true
		}
	}
	return false
}

// StageInputs uploads what every --input in args ("--input P" or
// "--input=P") names on the local file system — a file, a directory (its
// regular files) or a glob of files — to the blob store, and returns the
// job's inputs map: P, exactly as written (the job's text source names it
// so), to the blob key of the file or the key prefix (ending in "/") of the
// files. Put it in the job config with InputsConfig.
// The job's arguments stay as the user wrote them.
//
// Uploads are content addressed (InputKey), so running a job again on the
// same files uploads nothing. Values that name nothing local are left to
// the cluster, which reads them as blob keys of the tenant.
func StageInputs(ctx context.Context, store blob.Store, tenant string, args []string) (map[string]string, error) {
	inputs := map[string]string{}
	for i := range args {
		v, ok := inputValue(args, i)
		if !ok {
			continue
		}
		if _, done := inputs[v]; done {
			continue
		}
		files := localFiles(v)
		if len(files) == 0 {
			continue
		}
		if st, err := os.Stat(v); err == nil && !st.IsDir() {
			k, _, err := stageFile(ctx, store, tenant, "", v)
			if err != nil {
				return nil, err
			}
			inputs[v] = k
			continue
		}
		// Several files: one prefix named by the hash of their names and
		// contents, so the prefix holds exactly these files.
		h := sha256.New()
		sums := make([]string, len(files))
		for j, f := range files {
			sum, err := fileSum(f)
			if err != nil {
				return nil, err
			}
			sums[j] = sum
			fmt.Fprintf(h, "%s %s\n", sanitizeName(filepath.Base(f)), sum)
		}
		dir := "sha256-" + hex.EncodeToString(h.Sum(nil))
		for _, f := range files {
			if _, _, err := stageFile(ctx, store, tenant, dir, f); err != nil {
				return nil, err
			}
		}
		inputs[v] = "tenants/" + tenant + "/inputs/" + dir + "/"
	}
	if len(inputs) == 0 {
		return nil, nil
	}
	return inputs, nil
}

// InputsConfig returns config with the inputs map added under the
// "inputs" key (jobconfig.KeyInputs), as a JSON object the Dispatcher
// resolves text-source paths through (config may be nil).
func InputsConfig(config map[string]string, inputs map[string]string) map[string]string {
	if len(inputs) == 0 {
		return config
	}
	out := make(map[string]string, len(config)+1)
	maps.Copy(out, config)
	// ConfigStd sorts the keys, so the same inputs give the same config.
	out[jobconfig.KeyInputs], _ = sonic.ConfigStd.MarshalToString(inputs)
	return out
}

// inputValue returns the value of an --input flag at args[i], if there is one.
func inputValue(args []string, i int) (string, bool) {
	if v, ok := strings.CutPrefix(args[i], InputFlag+"="); ok {
		return v, true
	}
	if i > 0 && args[i-1] == InputFlag {
		return args[i], true
	}
	return "", false
}

// localFiles returns the regular files p names locally: p itself, the
// files of directory p (not hidden ones, not recursively), or the files
// glob p matches, in name order; nil when p names nothing local.
func localFiles(p string) []string {
	if p == "" || strings.HasPrefix(p, "tenants/") {
		return nil
	}
	st, err := os.Stat(p)
	switch {
	case err == nil && st.Mode().IsRegular():
		return []string{p}
	case err == nil && st.IsDir():
		ents, err := os.ReadDir(p)
		if err != nil {
			return nil
		}
		var out []string
		for _, e := range ents {
			if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") {
				out = append(out, filepath.Join(p, e.Name()))
			}
		}
		return out
	case err != nil && strings.ContainsAny(p, "*?["):
		m, _ := filepath.Glob(p)
		var out []string
		for _, f := range m {
			if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() {
				out = append(out, f)
			}
		}
		slices.Sort(out)
		return out
	}
	return nil
}

func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("input %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("input %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// stageFile uploads one file unless an object with its content is there:
// under dir when given, else under a directory named by its own hash.
func stageFile(ctx context.Context, store blob.Store, tenant, dir, path string) (string, int64, error) {
	sum, err := fileSum(path)
	if err != nil {
		return "", 0, err
	}
	if dir == "" {
		dir = "sha256-" + sum
	}
	key := "tenants/" + tenant + "/inputs/" + dir + "/" + sanitizeName(filepath.Base(path))
	f, err := os.Open(path)
	if err != nil {
		return "", 0, fmt.Errorf("input %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", 0, fmt.Errorf("input %s: %w", path, err)
	}
	if info, err := store.Stat(ctx, key); err == nil && info.Size == st.Size() {
		return key, st.Size(), nil
	} else if err != nil && !errors.Is(err, blob.ErrNotFound) {
		return "", 0, fmt.Errorf("upload input %s: %w", path, err)
	}
	if err := store.Put(ctx, key, f, st.Size()); err != nil {
		return "", 0, fmt.Errorf("upload input %s: %w", path, err)
	}
	return key, st.Size(), nil
}

// sanitizeName keeps a file name valid as a blob key segment.
func sanitizeName(name string) string {
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '\\' || r == '/' || r == ',' {
			return '_'
		}
		return r
	}, name)
	if name == "" || name == "." || name == ".." {
		return "input"
	}
	if len(name) > 200 {
		name = name[len(name)-200:]
	}
	return name
}
