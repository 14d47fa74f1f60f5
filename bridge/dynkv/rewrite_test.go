package dynkv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goindex/goindex/internal/testseed"
	"github.com/stretchr/testify/require"
)

// logDrive runs a lifecycle stream through a Server with a log (as its
// connections would, at the generator's clock) and through a twin Engine
// that has no log and never stops.
type logDrive struct {
	t    *testing.T
	path string
	cfg  Config
	srv  *Server
	twin *Engine
	g    *lifecycleGen
	auth *connState
	// appended counts the log bytes of every write command sent: the log's
	// size without rewrites.
	appended int64
}

func newLogDrive(t *testing.T, seed uint64, cfg Config) *logDrive {
	d := &logDrive{t: t, path: filepath.Join(t.TempDir(), "dynkv.aof"), cfg: cfg, twin: NewEngine(), auth: &connState{authed: true}}
	d.cfg.Addr, d.cfg.LogPath = "127.0.0.1:0", d.path
	d.g = newLifecycleGen(seed, func(key string, worker uint64) uint64 {
		v, _ := be64(d.twin.ExecAt(d.g.now, args("DYNKV.REGISTRATION_GENERATION", key, u64(worker))).bulk)
		return v
	})
	d.open()
	return d
}

// open starts the server on the log (replaying it).
func (d *logDrive) open() {
	d.t.Helper()
	s, err := NewServer(d.cfg)
	require.NoError(d.t, err, "NewServer on %s", d.path)
	s.engine.now = func() time.Time { return d.g.now }
	d.srv = s
	d.t.Cleanup(func() { s.Close() })
}

// run sends n commands to both, checking that the server answers as the
// twin.
func (d *logDrive) run(n int) {
	d.t.Helper()
	tickets := func(key string, r Rank) []byte {
		return d.twin.ExecAt(d.g.now, args("DYNKV.RANK_GENERATION", key, u64(r.Worker), u32(r.DPRank))).bulk
	}
	for range n {
		cmd := d.g.next(tickets)
		want := d.twin.ExecAt(d.g.now, cmd)
		d.g.observe(cmd, want)
		got, _ := d.srv.exec(d.auth, cmd)
		require.Equal(d.t, render(want), render(got), "%s: server and twin", cmd[0])
		if name := strings.ToUpper(string(cmd[0])); IsWrite(name) || isKeyspaceWrite(name) {
			stamp := [][]byte{[]byte(recordStamp), make([]byte, 8), {outcomeAccepted}}
			d.appended += int64(len(appendRecord(nil, stamp, cmd)))
		}
	}
}

// restart closes the server and opens it again on its log; every read must
// then equal the twin's.
func (d *logDrive) restart(when string) {
	d.t.Helper()
	require.NoError(d.t, d.srv.Close(), "Close")
	d.open()
	d.same(when)
}

func (d *logDrive) same(when string) {
	d.t.Helper()
	if got, want := engineSignature(d.srv.engine, d.g, d.g.now), engineSignature(d.twin, d.g, d.g.now); got != want {
		d.t.Fatalf("%s: the server reads differently from its twin:\n%s", when, firstLineDiff(got, want))
	}
	require.Zero(d.t, d.srv.LogDiverged(), "%s: records replayed with another outcome", when)
}

func (d *logDrive) admin(vs ...any) string {
	r, _ := d.srv.exec(d.auth, args(vs...))
	return render(r)
}

// info returns INFO persistence's field name.
func (d *logDrive) info(name string) string {
	r, _ := d.srv.exec(d.auth, args("INFO", "persistence"))
	for _, l := range strings.Split(string(r.bulk), "\r\n") {
		if v, ok := strings.CutPrefix(l, name+":"); ok {
			return v
		}
	}
	return ""
}

// waitRewrite waits until no rewrite runs.
func (d *logDrive) waitRewrite() {
	d.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); d.srv.rw.running.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			d.t.Fatal("a log rewrite still runs after 10 s")
		}
	}
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}

// TestServer_RewriteCompactsTheLog: SAVE, BGSAVE and BGREWRITEAOF replace
// the log by the state image and the records since; the log shrinks, a
// restart after each reads as a twin that never stopped, and LASTSAVE and
// INFO report the rewrites.
func TestServer_RewriteCompactsTheLog(t *testing.T) {
	d := newLogDrive(t, testseed.For(t, 1), Config{AutoRewritePercentage: -1})
	d.run(3000)
	grown := fileSize(t, d.path)
	require.Equal(t, "+OK", d.admin("SAVE"))
	saved := fileSize(t, d.path)
	require.Less(t, saved, grown/4, "SAVE: the log of 3000 commands compacts to the state")
	require.Equal(t, saved, d.srv.log.Size())
	require.Equal(t, "1", d.info("aof_rewrites"))
	require.Equal(t, strconv.FormatInt(saved, 10), d.info("aof_base_size"))
	require.Equal(t, strconv.FormatInt(saved, 10), d.info("aof_current_size"))
	d.restart("after SAVE")

	d.run(500)
	require.Equal(t, "+Background append only file rewriting started", d.admin("BGREWRITEAOF"))
	d.run(500) // appended while it may still run
	d.waitRewrite()
	d.run(200)
	d.restart("after BGREWRITEAOF")

	d.run(300)
	require.Equal(t, "+Background saving started", d.admin("BGSAVE"))
	d.waitRewrite()
	require.Equal(t, "ok", d.info("aof_last_bgrewrite_status"))
	require.Equal(t, "0", d.info("aof_rewrite_in_progress"))
	require.Equal(t, "1", d.info("aof_rewrites"), "rewrites since this server started")
	last, err := strconv.ParseInt(strings.TrimPrefix(d.admin("LASTSAVE"), ":"), 10, 64)
	require.NoError(t, err)
	require.InDelta(t, time.Now().Unix(), last, 5, "LASTSAVE")
	d.restart("after BGSAVE")
	d.run(300)
	d.restart("after more commands")
}

// TestServer_RewriteWhileOneRunsIsRefused: a second rewrite asked for while
// one runs gets Valkey's errors.
func TestServer_RewriteWhileOneRunsIsRefused(t *testing.T) {
	d := newLogDrive(t, 2, Config{AutoRewritePercentage: -1})
	d.run(200)
	release := make(chan struct{})
	reached := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) }) // lets Close end even if the test fails
	d.srv.rw.hook = func(stage string) error {
		if stage == stageImage {
			close(reached)
			<-release
		}
		return nil
	}
	require.Equal(t, "+Background append only file rewriting started", d.admin("BGREWRITEAOF"))
	<-reached
	require.Equal(t, "-ERR Background append only file rewriting already in progress", d.admin("BGREWRITEAOF"))
	require.Equal(t, "-ERR Background save already in progress", d.admin("BGSAVE"))
	require.Equal(t, "-ERR Background save already in progress", d.admin("SAVE"))
	require.Equal(t, "1", d.info("aof_rewrite_in_progress"))
	d.run(100) // writes go on while the rewrite copies
	once.Do(func() { close(release) })
	d.waitRewrite()
	d.srv.rw.hook = nil
	d.restart("after a rewrite with writes meanwhile")
}

var errCrash = errors.New("crash injected")

// TestServer_RewriteSurvivesACrashAtEveryStage stops a rewrite as a crash
// would at each of its stages (the temporary file with part of the image;
// with the image and the records appended meanwhile; synced; renamed over
// the log while the server still appends to the old file), with commands
// appended while it ran, then starts a server on what is on disk: it must
// read as the twin, the temporary file must be gone, and a later rewrite and
// restart must read as the twin too.
func TestServer_RewriteSurvivesACrashAtEveryStage(t *testing.T) {
	seed := testseed.For(t, 1)
	for i, stage := range []string{stageImage, stageTail, stageSynced, stageRenamed} {
		t.Run(stage, func(t *testing.T) {
			d := newLogDrive(t, seed+uint64(i), Config{AutoRewritePercentage: -1})
			d.run(1500)
			d.srv.rw.hook = func(s string) error {
				if s == stageImage || s == stageTail {
					d.run(100) // appended while the rewrite writes the image, or copies the records since
				}
				if s == stage {
					return errCrash
				}
				return nil
			}
			require.ErrorIs(t, d.srv.rewriteLog(), errCrash)
			if stage != stageRenamed {
				_, err := os.Stat(d.path + rewriteSuffix)
				require.NoError(t, err, "the crashed rewrite leaves its temporary file")
			}
			d.srv.rw.hook = nil
			d.restart("after a crash at " + stage)
			_, err := os.Stat(d.path + rewriteSuffix)
			require.ErrorIs(t, err, os.ErrNotExist, "the temporary file of the crashed rewrite is removed on open")
			d.run(300)
			require.Equal(t, "+OK", d.admin("SAVE"))
			d.run(100)
			d.restart("after a later rewrite")
		})
	}
}

// TestServer_AutomaticRewriteKeepsTheLogBounded: with a small
// auto-aof-rewrite-min-size the log is rewritten whenever it has doubled,
// so it stays a fraction of what was appended, and restarts read as the
// twin.
func TestServer_AutomaticRewriteKeepsTheLogBounded(t *testing.T) {
	d := newLogDrive(t, testseed.For(t, 1), Config{AutoRewriteMinSize: 32 << 10})
	for range 8 {
		d.run(500)
		d.waitRewrite()
	}
	n, err := strconv.Atoi(d.info("aof_rewrites"))
	require.NoError(t, err)
	require.Positive(t, n, "automatic rewrites")
	size := fileSize(t, d.path)
	require.Less(t, size, d.appended/2, "the log after automatic rewrites, against the %d bytes appended", d.appended)
	d.restart("after automatic rewrites")
	t.Logf("%d automatic rewrites; log %d bytes of %d appended", n, size, d.appended)
}

// TestServer_AutomaticRewriteConfig: CONFIG GET and SET of
// auto-aof-rewrite-percentage and auto-aof-rewrite-min-size (Valkey's
// memory units), their errors, and that percentage 0 turns the trigger off.
func TestServer_AutomaticRewriteConfig(t *testing.T) {
	d := newLogDrive(t, 3, Config{})
	require.Equal(t, "*[$"+hexOf("auto-aof-rewrite-percentage")+" $"+hexOf("100")+"]", d.admin("CONFIG", "GET", "auto-aof-rewrite-percentage"))
	require.Equal(t, "*[$"+hexOf("auto-aof-rewrite-min-size")+" $"+hexOf("67108864")+"]", d.admin("CONFIG", "GET", "auto-aof-rewrite-min-size"))
	require.Equal(t, "+OK", d.admin("CONFIG", "SET", "auto-aof-rewrite-min-size", "1kb", "auto-aof-rewrite-percentage", "0"))
	require.Equal(t, "*[$"+hexOf("auto-aof-rewrite-min-size")+" $"+hexOf("1024")+"]", d.admin("CONFIG", "GET", "auto-aof-rewrite-min-size"))
	d.run(500)
	require.Equal(t, "0", d.info("aof_rewrites"), "percentage 0: no automatic rewrite")
	require.Equal(t, "+OK", d.admin("CONFIG", "SET", "auto-aof-rewrite-percentage", "50"))
	d.run(50)
	d.waitRewrite()
	require.NotEqual(t, "0", d.info("aof_rewrites"), "percentage 50 over a 1 KiB minimum")
	require.True(t, strings.HasPrefix(d.admin("CONFIG", "SET", "auto-aof-rewrite-percentage", "-1"), "-ERR CONFIG SET failed"))
	require.True(t, strings.HasPrefix(d.admin("CONFIG", "SET", "auto-aof-rewrite-min-size", "12xb"), "-ERR CONFIG SET failed"))
	for in, want := range map[string]int64{"0": 0, "64mb": 64 << 20, "1K": 1000, "2GB": 2 << 30, "3m": 3e6, "7b": 7} {
		got, err := ParseMemory(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "-1", "mb", "1.5mb", "1tb", "99999999999gb"} {
		_, err := ParseMemory(bad)
		require.Error(t, err, bad)
	}
}

func hexOf(s string) string { return fmt.Sprintf("%x", s) }

// TestOpenLog_DamagedImageIsRefused: a log that ends inside its state image,
// or has an image after commands, is an error (the server does not start
// on an empty index), while a torn record after a complete image is cut off
// as before.
func TestOpenLog_DamagedImageIsRefused(t *testing.T) {
	d := newLogDrive(t, 4, Config{AutoRewritePercentage: -1})
	d.run(800)
	require.Equal(t, "+OK", d.admin("SAVE"))
	d.run(50)
	require.NoError(t, d.srv.Close())
	whole, err := os.ReadFile(d.path)
	require.NoError(t, err)
	imageEnds := imageBytesOnDisk(t, whole)
	open := func(b []byte) error {
		p := filepath.Join(t.TempDir(), "x.aof")
		require.NoError(t, os.WriteFile(p, b, 0o644))
		l, _, err := OpenLog(p, NewEngine(), false)
		if err == nil {
			l.Close()
		}
		return err
	}
	for _, cut := range []int{8 + 8 + len(imageChunk), imageEnds / 2, imageEnds - 1} {
		require.Error(t, open(whole[:cut]), "a log cut at %d, inside its image (%d bytes)", cut, imageEnds)
	}
	require.NoError(t, open(whole[:len(whole)-3]), "a torn record after the image")
	require.Error(t, open(append(append([]byte{}, whole[imageEnds:]...), whole[:imageEnds]...)), "an image after commands")
}

// imageBytesOnDisk returns where the image's records end in a log file.
func imageBytesOnDisk(t *testing.T, b []byte) int {
	off := 0
	for off+8 <= len(b) {
		n := int(uint32(b[off]) | uint32(b[off+1])<<8 | uint32(b[off+2])<<16 | uint32(b[off+3])<<24)
		args, err := decodeRecord(b[off+8 : off+8+n])
		require.NoError(t, err)
		off += 8 + n
		if string(args[0]) == imageEnd {
			return off
		}
	}
	t.Fatal("no image in the log")
	return 0
}
