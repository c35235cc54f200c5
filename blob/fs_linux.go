package blob

import (
	"cmp"
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// On Linux, objects are opened with one openat2(2) call relative to the
// objects directory, with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS: the kernel
// refuses any path that leaves the directory or crosses a symbolic link.
// That is the same guarantee os.Root gives, in one system call instead of
// one per path segment (os.Root walks the path), which matters for small
// reads. Kernels without openat2 (before 5.6, or filtered by seccomp) fall
// back to os.Root.

// objDir is the objects directory, held open for openat2.
type objDir struct {
	f  *os.File
	rc syscall.RawConn
}

const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// openObjDir opens the objects directory for openat2, or returns nil when
// openat2 is unavailable.
func openObjDir(root *os.Root) *objDir {
	f, err := root.Open(fsObjects)
	if err != nil {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil
	}
	d := &objDir{f: f, rc: rc}
	fd, err := d.openat2(".", unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		f.Close()
		return nil
	}
	unix.Close(fd)
	return d
}

// openat2 opens key below the directory. The fd is held by Control for the
// duration of the call, so a concurrent close cannot swap it.
func (d *objDir) openat2(key string, flags uint64) (int, error) {
	fd, err := -1, error(nil)
	cerr := d.rc.Control(func(dfd uintptr) {
		for {
			fd, err = unix.Openat2(int(dfd), key, &unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Resolve: resolveFlags})
			if err != unix.EINTR && err != unix.EAGAIN {
				return
			}
		}
	})
	if cerr != nil {
		return -1, cerr
	}
	if err != nil {
		return -1, &fs.PathError{Op: "openat2", Path: key, Err: openErr(err)}
	}
	return fd, nil
}

// openErr maps openat2's refusals onto the errors the rest of the backend
// checks for.
func openErr(err error) error {
	switch err {
	case unix.ENOTDIR:
		return fs.ErrNotExist // a parent is an object: no such key
	case unix.ELOOP, unix.EXDEV:
		return errEscape
	}
	return err
}

var errEscape = errors.New("the path crosses a symbolic link or leaves the store; refused")

func (d *objDir) close() error { return d.f.Close() }

// openObject opens the object file at key for reading.
func (s *fsStore) openObject(key string) (*os.File, error) {
	if s.od == nil {
		return s.root.Open(objPath(key))
	}
	fd, err := s.od.openat2(key, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), objPath(key)), nil
}

// statObject returns the size and modification time of the regular file at
// key, or fs.ErrNotExist when key names no regular file.
func (s *fsStore) statObject(key string) (int64, time.Time, error) {
	if s.od == nil {
		fi, err := s.root.Stat(objPath(key))
		if errors.Is(err, syscall.ENOTDIR) || (err == nil && !fi.Mode().IsRegular()) {
			err = fs.ErrNotExist
		}
		if err != nil {
			return 0, time.Time{}, err
		}
		return fi.Size(), fi.ModTime(), nil
	}
	fd, err := s.od.openat2(key, unix.O_PATH)
	if err != nil {
		return 0, time.Time{}, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, time.Time{}, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return 0, time.Time{}, fs.ErrNotExist
	}
	return st.Size, time.Unix(st.Mtim.Unix()), nil
}

// rmdir removes the empty directory dir ("objects/..."); it never removes a
// file, even one that took the directory's place a moment ago.
func (s *fsStore) rmdir(dir string) error {
	if s.od == nil {
		return rmdirPortable(s.root, dir)
	}
	rel := strings.TrimPrefix(dir, fsObjects+"/")
	parent, base := path.Split(rel)
	if parent == "" {
		var err error
		cerr := s.od.rc.Control(func(dfd uintptr) { err = unix.Unlinkat(int(dfd), base, unix.AT_REMOVEDIR) })
		return cmp.Or(cerr, err)
	}
	pfd, err := s.od.openat2(strings.TrimSuffix(parent, "/"), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	return unix.Unlinkat(pfd, base, unix.AT_REMOVEDIR)
}
