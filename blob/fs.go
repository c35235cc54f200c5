package blob

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// FSOptions configures the fs backend. See OpenFS.
type FSOptions struct {
	// Dir is the absolute directory that holds the store; it is created if
	// missing. Objects live in Dir/objects/<key>, in-flight writes in
	// Dir/.sluice-tmp.
	Dir string
	// StaleTempAge is how old a leftover temporary file (from a crash
	// mid-write) must be before OpenFS removes it. Zero means
	// DefaultStaleTempAge. Younger ones may belong to another process
	// writing to the same directory.
	StaleTempAge time.Duration
	// Logger receives what OpenFS cleaned up; nil discards.
	Logger *slog.Logger
}

// DefaultStaleTempAge is the FSOptions.StaleTempAge default.
const DefaultStaleTempAge = time.Hour

const (
	fsObjects = "objects"     // holds the objects, one file per key
	fsTemp    = ".sluice-tmp" // holds in-flight writes, never listed
	tmpPrefix = "put-"
	tmpSuffix = ".tmp"
	copyBuf   = 256 << 10
)

// fsStore is the fs backend. Every path goes through an os.Root, so even a
// symbolic link planted inside the directory cannot lead outside it.
type fsStore struct {
	dir    string
	url    string
	root   *os.Root
	od     *objDir // the objects directory for openat2 (Linux); nil: use root
	closed atomic.Bool
	bufs   sync.Pool // *[]byte of copyBuf, for Put
}

var _ Store = (*fsStore)(nil)

// OpenFS opens (creating if needed) the fs store in opts.Dir.
//
// Writes are atomic and durable: Put writes a temporary file in
// Dir/.sluice-tmp, fsyncs it, renames it into Dir/objects and fsyncs the
// directory, so a crash at any point leaves the old object or the new one.
// Temporary files are never listed; OpenFS removes those older than
// StaleTempAge.
//
// # Errors
//
//   - ErrInvalidURL: Dir is not an absolute path.
//   - ErrAccessDenied: Dir cannot be created or opened.
func OpenFS(ctx context.Context, opts FSOptions) (Store, error) {
	fail := func(kind error, msg string, err error) error {
		return &Error{Op: "open", Store: "file://" + opts.Dir, Kind: kind, Msg: msg, Err: err}
	}
	if opts.Dir == "" || !filepath.IsAbs(opts.Dir) {
		return nil, fail(ErrInvalidURL, "the directory must be an absolute path", nil)
	}
	if err := ctx.Err(); err != nil {
		return nil, fail(nil, "", err)
	}
	dir := filepath.Clean(opts.Dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fail(fsKind(err), "cannot create the store directory", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fail(fsKind(err), "cannot open the store directory", err)
	}
	for _, d := range []string{fsObjects, fsTemp} {
		if err := root.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			root.Close()
			return nil, fail(fsKind(err), "cannot create "+d, err)
		}
	}
	s := &fsStore{dir: dir, url: "file://" + dir, root: root, od: openObjDir(root)}
	s.bufs.New = func() any { b := make([]byte, copyBuf); return &b }
	age := cmp.Or(opts.StaleTempAge, DefaultStaleTempAge)
	removed := s.removeStaleTemps(time.Now().Add(-age))
	if removed > 0 && opts.Logger != nil {
		opts.Logger.Info("blob: removed stale temporary files", "dir", dir, "count", removed, "older_than", age)
	}
	return s, nil
}

// removeStaleTemps removes temporary files last written before cutoff. It
// only touches files named like ours, in our temp directory.
func (s *fsStore) removeStaleTemps(cutoff time.Time) int {
	f, err := s.root.Open(fsTemp)
	if err != nil {
		return 0
	}
	defer f.Close()
	ents, _ := f.ReadDir(-1)
	n := 0
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(name, tmpPrefix) || !strings.HasSuffix(name, tmpSuffix) {
			continue
		}
		fi, err := e.Info()
		if err != nil || !fi.ModTime().Before(cutoff) {
			continue
		}
		if s.root.Remove(fsTemp+"/"+name) == nil {
			n++
		}
	}
	return n
}

func (s *fsStore) fail(op, key string, kind error, msg string, err error) error {
	if errors.Is(err, os.ErrClosed) || (kind == nil && s.closed.Load()) {
		kind, msg = ErrClosed, "the store was closed"
	}
	return &Error{Op: op, Key: key, Store: s.url, Kind: kind, Msg: msg, Err: err}
}

// check runs the checks every operation starts with.
func (s *fsStore) check(ctx context.Context, op, key string) error {
	if kind, msg, err := precheck(ctx, s.closed.Load(), key); kind != nil || err != nil {
		return s.fail(op, key, kind, msg, err)
	}
	return nil
}

// fsKind maps an OS error to a sentinel.
func fsKind(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return ErrNotFound
	case errors.Is(err, fs.ErrPermission), errors.Is(err, errEscape):
		return ErrAccessDenied
	case errors.Is(err, os.ErrClosed):
		return ErrClosed
	}
	return nil
}

func objPath(key string) string { return fsObjects + "/" + key }

// Put implements Store.Put.
func (s *fsStore) Put(ctx context.Context, key string, r io.Reader, size int64) (err error) {
	if err := s.check(ctx, "put", key); err != nil {
		return err
	}
	if size < -1 {
		return s.fail("put", key, ErrInvalidArgument, "size is below -1 (-1 means unknown)", nil)
	}
	f, tmp, err := s.createTemp()
	if err != nil {
		return s.fail("put", key, fsKind(err), "cannot create a temporary file", err)
	}
	defer func() {
		if f != nil {
			f.Close()
		}
		if err != nil {
			s.root.Remove(tmp)
		}
	}()

	if err := s.copyIn(ctx, f, r, size); err != nil {
		return s.copyError(ctx, key, err)
	}
	if err := f.Sync(); err != nil {
		return s.fail("put", key, fsKind(err), "cannot sync the temporary file", err)
	}
	if err := f.Close(); err != nil {
		f = nil
		return s.fail("put", key, fsKind(err), "cannot close the temporary file", err)
	}
	f = nil
	if err := ctx.Err(); err != nil {
		return s.fail("put", key, nil, "nothing was stored", err)
	}
	return s.install(key, tmp)
}

// srcError marks an error that came from the caller's reader.
type srcError struct{ err error }

func (e srcError) Error() string { return e.err.Error() }
func (e srcError) Unwrap() error { return e.err }

// copyIn copies exactly size bytes (or to EOF when size is -1) from r to f,
// honouring ctx between chunks.
func (s *fsStore) copyIn(ctx context.Context, f *os.File, r io.Reader, size int64) error {
	bp := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(bp)
	buf := *bp
	done := ctx.Done()
	var n int64
	for size < 0 || n < size {
		if done != nil {
			select {
			case <-done:
				return ctx.Err()
			default:
			}
		}
		want := buf
		if size >= 0 && size-n < int64(len(want)) {
			want = want[:size-n]
		}
		m, rerr := r.Read(want)
		if m > 0 {
			if _, werr := f.Write(want[:m]); werr != nil {
				return werr
			}
			n += int64(m)
		}
		if rerr == io.EOF {
			if size >= 0 && n < size {
				return sizeMismatch(n, size)
			}
			return nil
		}
		if rerr != nil {
			return srcError{rerr}
		}
	}
	return nil
}

type errShort struct{ got, want int64 }

func (e errShort) Error() string {
	return "the reader ended after " + itoa(e.got) + " of the " + itoa(e.want) + " bytes declared"
}

func sizeMismatch(got, want int64) error { return errShort{got, want} }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// copyError classifies an error from copyIn, in the same words the s3
// backend uses.
func (s *fsStore) copyError(ctx context.Context, key string, err error) error {
	var short errShort
	var src srcError
	switch {
	case errors.As(err, &short):
		return s.fail("put", key, ErrSizeMismatch, short.Error()+"; nothing was stored", nil)
	case errors.As(err, &src):
		return s.fail("put", key, nil, "reading the source failed; nothing was stored", src.err)
	case ctx.Err() != nil:
		return s.fail("put", key, nil, "nothing was stored", err)
	}
	return s.fail("put", key, fsKind(err), "cannot write the temporary file; nothing was stored", err)
}

func (s *fsStore) createTemp() (*os.File, string, error) {
	var rnd [12]byte
	for {
		rand.Read(rnd[:])
		name := fsTemp + "/" + tmpPrefix + hex.EncodeToString(rnd[:]) + tmpSuffix
		f, err := s.root.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, name, err
	}
}

// install renames the temporary file onto the key and makes the rename
// durable. A concurrent Delete may remove the parent directories between our
// mkdir and rename (it prunes empty ones); then we make them again.
func (s *fsStore) install(key, tmp string) error {
	dst := objPath(key)
	parent := path.Dir(dst)
	var created []string
	var err error
	for range 16 {
		var c []string
		c, err = s.mkdirs(parent)
		created = append(created, c...)
		if err == nil {
			err = s.root.Rename(tmp, dst)
		}
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if err != nil {
		if errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			// A directory sits where the object would go: keys exist below it.
			if s.rmdir(dst) == nil { // empty leftover: take its place
				if err = s.root.Rename(tmp, dst); err == nil {
					return s.syncDirs(key, parent, created)
				}
			}
			return s.fail("put", key, ErrConflict, "other keys exist below this key; the fs backend cannot hold both (S3 can); choose another key", nil)
		}
		if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, ErrConflict) {
			return s.fail("put", key, ErrConflict, "a parent of this key is an object; the fs backend cannot hold both (S3 can); choose another key", nil)
		}
		return s.fail("put", key, fsKind(err), "cannot move the object into place", err)
	}
	return s.syncDirs(key, parent, created)
}

// syncDirs fsyncs the directory that received the rename and the parents of
// any directories this Put created, so the new entries survive a crash.
func (s *fsStore) syncDirs(key, parent string, created []string) error {
	dirs := []string{parent}
	for _, c := range created {
		dirs = append(dirs, path.Dir(c))
	}
	slices.Sort(dirs)
	dirs = slices.Compact(dirs)
	for _, d := range dirs {
		f, err := s.root.Open(d)
		if err != nil {
			continue // removed by a concurrent Delete: nothing left to make durable
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return s.fail("put", key, fsKind(err), "cannot sync directory "+d, err)
		}
	}
	return nil
}

// mkdirs creates dir (a path inside the root) and its missing parents,
// returning the ones it created.
func (s *fsStore) mkdirs(dir string) ([]string, error) {
	if fi, err := s.root.Stat(dir); err == nil {
		if !fi.IsDir() {
			return nil, ErrConflict
		}
		return nil, nil
	}
	var created []string
	cur := fsObjects
	for _, seg := range strings.Split(strings.TrimPrefix(dir, fsObjects+"/"), "/") {
		cur += "/" + seg
		err := s.root.Mkdir(cur, 0o755)
		switch {
		case err == nil:
			created = append(created, cur)
		case errors.Is(err, fs.ErrExist):
			fi, serr := s.root.Stat(cur)
			if serr == nil && !fi.IsDir() {
				return created, ErrConflict
			}
		case errors.Is(err, syscall.ENOTDIR):
			return created, ErrConflict
		default:
			return created, err
		}
	}
	return created, nil
}

// fsReader is an open object: an *os.File, or a section of one.
type fsReader struct {
	io.Reader
	f *os.File
}

func (r *fsReader) Close() error { return r.f.Close() }

// open opens the object file at key and stats it.
func (s *fsStore) open(op, key string) (*os.File, fs.FileInfo, error) {
	f, err := s.openObject(key)
	if err != nil {
		if errors.Is(err, syscall.ENOTDIR) {
			err = fs.ErrNotExist
		}
		return nil, nil, s.fail(op, key, fsKind(err), notFoundMsg(err), err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fs.ErrNotExist
	}
	if err != nil {
		f.Close()
		return nil, nil, s.fail(op, key, fsKind(err), notFoundMsg(err), nil)
	}
	return f, fi, nil
}

func notFoundMsg(err error) string {
	if errors.Is(err, fs.ErrNotExist) {
		return hintNoKey
	}
	return ""
}

// Get implements Store.Get.
func (s *fsStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := s.check(ctx, "get", key); err != nil {
		return nil, err
	}
	f, _, err := s.open("get", key)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// GetRange implements Store.GetRange.
func (s *fsStore) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := s.check(ctx, "get", key); err != nil {
		return nil, err
	}
	if rule := checkRange(offset, length); rule != "" {
		return nil, s.fail("get", key, ErrInvalidArgument, rule, nil)
	}
	f, fi, err := s.open("get", key)
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	if offset > size {
		f.Close()
		return nil, s.fail("get", key, ErrInvalidRange, "offset "+itoa(offset)+" is past the end of the object ("+itoa(size)+" bytes)", nil)
	}
	n := size - offset
	if length >= 0 && length < n {
		n = length
	}
	return &fsReader{Reader: io.NewSectionReader(f, offset, n), f: f}, nil
}

// Stat implements Store.Stat.
func (s *fsStore) Stat(ctx context.Context, key string) (Info, error) {
	if err := s.check(ctx, "stat", key); err != nil {
		return Info{}, err
	}
	size, mod, err := s.statObject(key)
	if err != nil {
		return Info{}, s.fail("stat", key, fsKind(err), notFoundMsg(err), err)
	}
	return Info{Key: key, Size: size, ModTime: mod}, nil
}

// Delete implements Store.Delete. It also removes parent directories left
// empty, so the tree stays small and a later key may take their place.
func (s *fsStore) Delete(ctx context.Context, key string) error {
	if err := s.check(ctx, "delete", key); err != nil {
		return err
	}
	p := objPath(key)
	fi, err := s.root.Lstat(p)
	if err != nil || fi.IsDir() {
		if err == nil || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil // nothing named key: deleting is a no-op
		}
		return s.fail("delete", key, fsKind(err), "", err)
	}
	if err := s.root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return s.fail("delete", key, fsKind(err), "", err)
	}
	parent := path.Dir(p)
	if f, err := s.root.Open(parent); err == nil {
		f.Sync()
		f.Close()
	}
	for d := parent; d != fsObjects; d = path.Dir(d) {
		if s.rmdir(d) != nil { // fails when not empty: stop
			break
		}
	}
	return nil
}

// List implements Store.List. It walks the tree in key order: within a
// directory, entries sort by name, with directories as name+"/", which is
// exactly the order of the keys below them.
func (s *fsStore) List(ctx context.Context, prefix, startAfter string, limit int) (Page, error) {
	if s.closed.Load() {
		return Page{}, s.fail("list", prefix, ErrClosed, "the store was closed", nil)
	}
	if rule := prefixRule(prefix); rule != "" {
		return Page{}, s.fail("list", prefix, ErrInvalidKey, "prefix: "+rule, nil)
	}
	if rule := startAfterRule(startAfter); rule != "" {
		return Page{}, s.fail("list", startAfter, ErrInvalidKey, rule, nil)
	}
	limit = clampLimit(limit)
	// Start in the deepest directory the prefix names; its last, partial
	// segment filters that directory's entries.
	dir, part := "", prefix
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		dir, part = prefix[:i], prefix[i+1:]
	}
	w := &fsWalk{s: s, ctx: ctx, startAfter: startAfter, max: limit + 1}
	if err := w.walk(dir, part); err != nil {
		return Page{}, s.fail("list", prefix, fsKind(err), "", err)
	}
	return finishPage(w.items, limit), nil
}

type fsWalk struct {
	s          *fsStore
	ctx        context.Context
	startAfter string
	max        int
	items      []Info
}

type walkEnt struct {
	sortKey string // name, or name+"/" for a directory
	name    string
	dir     bool
	ent     fs.DirEntry
}

// walk visits dir (a key prefix without trailing '/', "" for the top),
// keeping entries whose names start with part. It returns early once it has
// max items.
func (w *fsWalk) walk(dir, part string) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	p := fsObjects
	if dir != "" {
		p += "/" + dir
	}
	f, err := w.s.root.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		return err
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	list := make([]walkEnt, 0, len(ents))
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, part) || segmentRule(name) != "" || textRule(name) != "" {
			continue
		}
		switch {
		case e.IsDir():
			list = append(list, walkEnt{name + "/", name, true, e})
		case e.Type().IsRegular():
			list = append(list, walkEnt{name, name, false, e})
		}
	}
	slices.SortFunc(list, func(a, b walkEnt) int { return strings.Compare(a.sortKey, b.sortKey) })
	for _, e := range list {
		key := e.name
		if dir != "" {
			key = dir + "/" + e.name
		}
		if e.dir {
			sub := key + "/"
			// Every key below sub starts with sub; skip the subtree when
			// all of them sort at or before startAfter.
			if w.startAfter >= sub && !strings.HasPrefix(w.startAfter, sub) {
				continue
			}
			if err := w.walk(key, ""); err != nil {
				return err
			}
		} else {
			if key <= w.startAfter || len(key) > MaxKeyLen {
				continue
			}
			fi, err := e.ent.Info()
			if err != nil {
				continue // deleted while listing
			}
			w.items = append(w.items, Info{Key: key, Size: fi.Size(), ModTime: fi.ModTime()})
		}
		if len(w.items) >= w.max {
			return nil
		}
	}
	return nil
}

// rmdirPortable removes dir if it is an empty directory. Between the check
// and the removal another writer could put a file there; only the openat2
// path (Linux) closes that window.
func rmdirPortable(root *os.Root, dir string) error {
	fi, err := root.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return syscall.ENOTDIR
	}
	return root.Remove(dir)
}

// Close implements Store.Close.
func (s *fsStore) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.od != nil {
		s.od.close()
	}
	return s.root.Close()
}
