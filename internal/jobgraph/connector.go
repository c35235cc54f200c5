package jobgraph

import (
	"encoding/json"
	"errors"
)

// Vertex config keys of the host connectors. The guest SDK writes them
// while the plan runs; the host reads them only through the methods below,
// so each key is read in one place.
const (
	// ConfigPaths (text source) is a JSON list of the paths it reads.
	ConfigPaths = "paths"
	// ConfigPath (file sink) is the directory, relative to the tenant's
	// files, that the sink's parts are committed under.
	ConfigPath = "path"
)

// SourcePaths returns the paths a text source reads (its ConfigPaths).
//
// # Errors
//
// An error when the config is not a non-empty JSON list of strings.
func (v *Vertex) SourcePaths() ([]string, error) {
	var paths []string
	if err := json.Unmarshal([]byte(v.Config[ConfigPaths]), &paths); err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, errors.New("no paths")
	}
	return paths, nil
}

// SinkPath returns a file sink's path (its ConfigPath) as the plan wrote
// it; Validate and the sink check it.
func (v *Vertex) SinkPath() string { return v.Config[ConfigPath] }
