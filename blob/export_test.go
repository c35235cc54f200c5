package blob

import "context"

// OpenFSPortable opens an fs store that resolves every path through os.Root,
// as on systems without openat2, so tests cover that path on Linux too.
func OpenFSPortable(ctx context.Context, opts FSOptions) (Store, error) {
	s, err := OpenFS(ctx, opts)
	if err != nil {
		return nil, err
	}
	if fs := s.(*fsStore); fs.od != nil {
		fs.od.close()
		fs.od = nil
	}
	return s, nil
}
