package discovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/goindex/goindex/dynamo"
)

// DefaultPollEvery spaces the file store's listings.
const DefaultPollEvery = 500 * time.Millisecond

// DefaultFileTTL is how long a file-store record lives untouched: Dynamo's
// file store keeps its records alive by touching them (every third of this,
// at least every second) and treats one untouched for longer as expired,
// as an etcd lease would be (lib/runtime storage/kv/file.rs: DEFAULT_TTL).
const DefaultFileTTL = 10 * time.Second

// maxDirEntries bounds one listing of the file store: a directory that
// holds more than this is not Dynamo's and is refused (a failed listing).
const maxDirEntries = 1 << 16

// tempPrefix marks the file store's files still being written (renamed to
// their key when complete).
const tempPrefix = ".tmp_"

// DirConfig configures Dir.
type DirConfig struct {
	// Root is the file store's directory, as Dynamo's DYN_FILE_KV names it
	// (Dynamo's default: $TMPDIR/dynamo_store_kv); required.
	Root string
	// Scope is the pool's endpoint scope; required.
	Scope dynamo.Scope
	// Workers follows the workers' instance records instead of the event
	// channels (broker mode), as EtcdConfig.Workers.
	Workers bool
	// PollEvery spaces the listings (a directory on shared storage sends
	// no change notifications); optional; default: DefaultPollEvery.
	PollEvery time.Duration
	// TTL is how long a record lives untouched; optional; default:
	// DefaultFileTTL.
	TTL time.Duration
	// Logger receives skipped records and failed listings; optional;
	// default: discard.
	Logger *slog.Logger
}

// Dir reads Dynamo's file-store discovery (DYN_DISCOVERY_BACKEND=file,
// for hosts without etcd): the same buckets and records as etcd's, a
// bucket a directory under Root and a record a file in it named by its key
// percent-encoded (every byte but ASCII letters and digits; a bucket held
// as nested directories, one per key segment, is read too [unverified]:
// the layout is read from one release's source). A record counts while
// its file is touched within TTL: a worker that dies stops touching its
// files and they expire, as its etcd lease would. Dir polls (PollEvery)
// and never writes to the store.
type Dir struct {
	cfg DirConfig
	records
	buckets []string
	health  health
}

// NewDir checks cfg; it does no I/O.
func NewDir(cfg DirConfig) (*Dir, error) {
	if cfg.Root == "" {
		return nil, fmt.Errorf("%w: no file store directory", ErrBadConfig)
	}
	if err := checkPoolScope(cfg.Scope); err != nil {
		return nil, err
	}
	if cfg.PollEvery <= 0 {
		cfg.PollEvery = DefaultPollEvery
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultFileTTL
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	d := &Dir{cfg: cfg, records: newRecords(cfg.Scope, cfg.Workers, cfg.Logger)}
	d.buckets = []string{strings.TrimSuffix(channelsRoot, "/"), strings.TrimSuffix(sourcesRoot, "/")}
	if cfg.Workers {
		d.buckets = []string{strings.TrimSuffix(instancesRoot, "/")}
	}
	d.health.name = d.String()
	return d, nil
}

// String names the source in logs.
func (d *Dir) String() string {
	if d.cfg.Workers {
		return "file store " + d.cfg.Root + " (workers)"
	}
	return "file store " + d.cfg.Root
}

// Health implements Source.
func (d *Dir) Health() error { return d.health.state() }

// storedFile is one record file as last read: the file (to tell a rewrite:
// the store replaces a record by renaming a new file over it), its key and
// the publisher it made, if any.
type storedFile struct {
	info fs.FileInfo
	key  string
	pub  Publisher
	ok   bool
}

// Watch lists the pool's records every PollEvery and reports what appeared,
// changed or went (deleted, or expired untouched), until ctx ends. A
// listing that fails (Root not a readable directory) is logged once and
// tried again; a Root or bucket not made yet is an empty store.
func (d *Dir) Watch(ctx context.Context, fn func(Update)) error {
	known := map[string]Publisher{}
	files := map[string]storedFile{}
	tick := time.NewTicker(d.cfg.PollEvery)
	defer tick.Stop()
	for {
		if err := d.poll(known, files, fn); err != nil {
			if d.health.failed(err) {
				d.cfg.Logger.Warn("file store discovery failing; retrying", "every", d.cfg.PollEvery, "err", err)
			}
		} else if ended := d.health.succeeded(true); ended != nil {
			d.cfg.Logger.Info("file store discovery listed again", "after", ended)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// poll lists the buckets once and reports the differences from known.
// files caches each record file as last read, so a file is read (and a
// bad one logged) once per version, not once per poll.
func (d *Dir) poll(known map[string]Publisher, files map[string]storedFile, fn func(Update)) error {
	if fi, err := os.Stat(d.cfg.Root); err == nil && !fi.IsDir() {
		return fmt.Errorf("%s: not a directory", d.cfg.Root)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("file store: %w", err)
	}
	now := time.Now()
	seen := map[string]bool{}   // keys of the pool's live records
	listed := map[string]bool{} // paths of live record files
	for _, bucket := range d.buckets {
		dir := filepath.Join(d.cfg.Root, filepath.FromSlash(bucket))
		entries := 0
		err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil // not made yet, or gone while listed
				}
				return err
			}
			if entries++; entries > maxDirEntries {
				return fmt.Errorf("more than %d entries: not a Dynamo file store", maxDirEntries)
			}
			if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), tempPrefix) {
				return nil
			}
			info, err := e.Info()
			if err != nil || now.Sub(info.ModTime()) > d.cfg.TTL {
				return nil // gone while listed, or expired: its owner stopped touching it
			}
			listed[path] = true
			f, cached := files[path]
			if !cached || !os.SameFile(f.info, info) || f.info.Size() != info.Size() {
				f = d.read(bucket, dir, path)
			}
			f.info = info
			files[path] = f
			if f.ok {
				seen[f.key] = true
				note(known, f.key, f.pub, fn)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("list %s: %w", dir, err)
		}
	}
	for path := range files {
		if !listed[path] {
			delete(files, path)
		}
	}
	sweep(known, seen, fn)
	return nil
}

// read reads the record file at path, in bucket's directory dir, and
// makes what it says of the pool.
func (d *Dir) read(bucket, dir, path string) storedFile {
	key, ok := d.key(bucket, dir, path)
	if !ok {
		return storedFile{}
	}
	value, err := readRecord(path)
	if err != nil {
		d.cfg.Logger.Warn("discovery record skipped", "file", path, "err", err)
		return storedFile{}
	}
	f := storedFile{key: key}
	f.pub, f.ok = d.publisher(key, value)
	return f
}

// key turns a record file's path into its store key: the bucket, then
// each path segment below it percent-decoded (Dynamo writes one segment,
// the whole key encoded). A name that does not decode is skipped.
func (d *Dir) key(bucket, dir, path string) (string, bool) {
	rel, err := filepath.Rel(dir, path)
	if err != nil {
		return "", false
	}
	parts := strings.Split(filepath.ToSlash(rel), "/")
	for i, p := range parts {
		if parts[i], err = url.PathUnescape(p); err != nil {
			d.cfg.Logger.Warn("discovery record skipped: its name does not decode", "file", path, "err", err)
			return "", false
		}
	}
	return bucket + "/" + strings.Join(parts, "/"), true
}

// readRecord reads one record file, at most MaxRecordBytes. It opens
// without blocking and reads only a regular file: a FIFO put where a record
// was listed would otherwise hold the poll until something wrote to it.
func readRecord(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%v)", fi.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxRecordBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxRecordBytes {
		return nil, fmt.Errorf("record over %d bytes", MaxRecordBytes)
	}
	return b, nil
}
