//go:build !linux

package blob

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// objDir is unused off Linux: every path goes through os.Root.
type objDir struct{}

func openObjDir(*os.Root) *objDir { return nil }

func (*objDir) close() error { return nil }

var errEscape = errors.New("the path leaves the store; refused")

func (s *fsStore) openObject(key string) (*os.File, error) { return s.root.Open(objPath(key)) }

func (s *fsStore) statObject(key string) (int64, time.Time, error) {
	fi, err := s.root.Stat(objPath(key))
	if errors.Is(err, syscall.ENOTDIR) || (err == nil && !fi.Mode().IsRegular()) {
		err = fs.ErrNotExist
	}
	if err != nil {
		return 0, time.Time{}, err
	}
	return fi.Size(), fi.ModTime(), nil
}

func (s *fsStore) rmdir(dir string) error { return rmdirPortable(s.root, dir) }
