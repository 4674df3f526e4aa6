// Package s3test gives tests a real S3 server: SeaweedFS (`weed mini`), one per test binary,
// started on first use on loopback ports of its own, with a fresh bucket per test. `make deps`
// builds the weed binary once per machine (scripts/weed.sh); when it is missing the test fails
// with a message saying to run it — it never skips.
//
// The server is started the way internal/pgtest starts PostgreSQL: in a temporary directory
// that records its owner's pid, so that a later run removes what a killed test binary left.
// pgtest.Main stops it after the tests (before its leak check); in a package without it, and
// when the test binary is killed, the server gets SIGKILL as the test binary exits (Pdeathsig).
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/internal/toolcache"
	"github.com/playhead/playhead/storage"
)

// Version is the SeaweedFS module version scripts/weed.sh builds (a test checks they agree).
const Version = "v0.0.0-20261109003541-7506e5f91cd6"

// EnvWeed names a variable that points at a weed binary to use instead of the cached build.
const EnvWeed = "PLAYHEAD_TEST_WEED"

// Region is the region the server accepts in signatures.
const Region = "us-east-1"

// startTimeout bounds how long Shared waits for the server's S3 API to answer.
const startTimeout = 90 * time.Second

var (
	startOnce sync.Once
	server    *Server
	startErr  error
	buckets   atomic.Int64
)

// Server is a running SeaweedFS with one identity that may do everything.
type Server struct {
	// Endpoint is the S3 API, http://127.0.0.1:port.
	Endpoint string
	// AccessKeyID and SecretAccessKey are the identity the server was started with; requests
	// signed with anything else, and anonymous ones, get 403.
	AccessKeyID, SecretAccessKey string
	// Client is a minio-go client with that identity, for tests to look into buckets.
	Client *minio.Client
	dir    string
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has exited and been reaped
	log    string
}

// WeedPath returns the weed binary the tests use: $PLAYHEAD_TEST_WEED, or the build of
// `make deps` in the per-machine cache.
func WeedPath() string {
	if p := os.Getenv(EnvWeed); p != "" {
		return p
	}
	return filepath.Join(toolcache.Dir(), "weed-"+Version, "weed")
}

// Shared returns the server for this test binary, starting it on first use.
func Shared(t testing.TB) *Server {
	t.Helper()
	startOnce.Do(func() {
		server, startErr = start()
		if startErr == nil {
			pgtest.AtExit(server.kill)
		}
	})
	if startErr != nil {
		t.Fatalf("s3test: no S3 server for the tests: %v", startErr)
	}
	return server
}

// Bucket creates an empty bucket for t and returns its name. It is emptied and removed when t
// passes (kept for a look when it fails, until the server stops).
func Bucket(t testing.TB) string {
	t.Helper()
	s := Shared(t)
	name := fmt.Sprintf("t%d-%s", buckets.Add(1), randomHex(4))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Client.MakeBucket(ctx, name, minio.MakeBucketOptions{Region: Region}); err != nil {
		t.Fatalf("s3test: create bucket %s: %v", name, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for obj := range s.Client.ListObjectsIter(ctx, name, minio.ListObjectsOptions{Recursive: true}) {
			if obj.Err == nil {
				_ = s.Client.RemoveObject(ctx, name, obj.Key, minio.RemoveObjectOptions{})
			}
		}
		_ = s.Client.RemoveBucket(ctx, name)
	})
	return name
}

// Config returns the storage configuration of bucket on the shared server (path style, since
// the server has no DNS names for buckets).
func (s *Server) Config(bucket string) storage.S3Config {
	return storage.S3Config{Endpoint: s.Endpoint, Region: Region, Bucket: bucket,
		AccessKeyID: s.AccessKeyID, SecretAccessKey: s.SecretAccessKey, PathStyle: true}
}

// Env returns the PLAYHEAD_* variables that point a playhead binary at bucket.
func (s *Server) Env(bucket string) map[string]string {
	return map[string]string{
		"PLAYHEAD_STORAGE":              "s3",
		"PLAYHEAD_S3_ENDPOINT":          s.Endpoint,
		"PLAYHEAD_S3_REGION":            Region,
		"PLAYHEAD_S3_BUCKET":            bucket,
		"PLAYHEAD_S3_ACCESS_KEY_ID":     s.AccessKeyID,
		"PLAYHEAD_S3_SECRET_ACCESS_KEY": s.SecretAccessKey,
		"PLAYHEAD_S3_PATH_STYLE":        "true",
	}
}

// Store returns a storage.S3 on a new bucket for t.
func Store(t testing.TB) (*storage.S3, string) {
	t.Helper()
	bucket := Bucket(t)
	st, err := storage.NewS3(context.Background(), Shared(t).Config(bucket))
	if err != nil {
		t.Fatalf("s3test: %v", err)
	}
	return st, bucket
}

// Backends returns a constructor of an empty store per backend a test runs against: "Local",
// a directory of the test's own, and "S3", a fresh bucket of the shared SeaweedFS.
func Backends() map[string]func(t *testing.T) storage.Store {
	return map[string]func(t *testing.T) storage.Store{
		"Local": func(t *testing.T) storage.Store {
			st, err := storage.NewLocal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		"S3": func(t *testing.T) storage.Store {
			st, _ := Store(t)
			return st
		},
	}
}

// Keys lists every object key in bucket.
func (s *Server) Keys(t testing.TB, bucket string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var keys []string
	for obj := range s.Client.ListObjectsIter(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			t.Fatalf("s3test: list %s: %v", bucket, obj.Err)
		}
		keys = append(keys, obj.Key)
	}
	return keys
}

// Unfinished lists the keys of bucket's multipart uploads that were neither completed nor
// aborted.
func (s *Server) Unfinished(t testing.TB, bucket string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var keys []string
	for up := range s.Client.ListIncompleteUploads(ctx, bucket, "", true) {
		if up.Err != nil {
			t.Fatalf("s3test: list unfinished uploads of %s: %v", bucket, up.Err)
		}
		keys = append(keys, up.Key)
	}
	return keys
}

const (
	dirPrefix = "playhead-s3test-"
	ownerFile = "owner.pid"
)

func start() (*Server, error) {
	weed := WeedPath()
	if _, err := os.Stat(weed); err != nil {
		return nil, fmt.Errorf("the SeaweedFS binary %s is missing (%v): run `make deps` once on this machine "+
			"(it builds SeaweedFS %s into the per-machine cache, about 6 minutes), or set %s", weed, err, Version, EnvWeed)
	}
	removeAbandoned()
	var lastErr error
	// A port picked free can be taken by another process before weed binds it: try again
	// with new ones.
	for range 3 {
		s, err := launch(weed)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func launch(weed string) (*Server, error) {
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ports, err := freePorts(9)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{
		Endpoint:        fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		AccessKeyID:     "s3test" + randomHex(6),
		SecretAccessKey: randomHex(20),
		dir:             dir,
		log:             filepath.Join(dir, "weed.log"),
	}
	// Every port is given, so that test binaries running side by side never collide on
	// SeaweedFS's fixed defaults (8333, 9333, 8888, …); what mini would start besides S3 is off.
	args := []string{"mini", "-dir=" + data, "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		fmt.Sprintf("-s3.port=%d", ports[0]), fmt.Sprintf("-s3.port.grpc=%d", ports[1]),
		fmt.Sprintf("-master.port=%d", ports[2]), fmt.Sprintf("-master.port.grpc=%d", ports[3]),
		fmt.Sprintf("-volume.port=%d", ports[4]), fmt.Sprintf("-volume.port.grpc=%d", ports[5]),
		fmt.Sprintf("-filer.port=%d", ports[6]), fmt.Sprintf("-filer.port.grpc=%d", ports[7]),
		fmt.Sprintf("-admin.port=%d", ports[8]), "-admin.port.legacy=0", "-admin.ui=false",
		"-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.telemetry=false",
		"-filer.localSocket=" + filepath.Join(dir, "filer.sock"), "-s3.localSocket=" + filepath.Join(dir, "s3.sock"),
	}
	logFile, err := os.Create(s.log)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logFile.Close()
	s.cmd = exec.Command(weed, args...)
	s.cmd.Dir = dir
	s.cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+s.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+s.SecretAccessKey)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	// SIGKILL when the thread that started it ends. Go ends a thread only when a goroutine
	// locked to it exits, so the start runs on a locked goroutine that then waits for the
	// process: the thread, and the server, live until the server is stopped or the test
	// binary exits.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	started := make(chan error)
	s.exited = make(chan struct{})
	go func() {
		runtime.LockOSThread()
		err := s.cmd.Start()
		started <- err
		if err == nil {
			_ = s.cmd.Wait()
		}
		close(s.exited)
	}()
	if err := <-started; err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", weed, err)
	}
	exited := s.exited

	s.Client, err = minio.New(strings.TrimPrefix(s.Endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(s.AccessKeyID, s.SecretAccessKey, ""), Region: Region,
		BucketLookup: minio.BucketLookupPath, MaxRetries: 1,
	})
	if err != nil {
		s.kill()
		return nil, err
	}
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-exited:
			out, _ := os.ReadFile(s.log)
			os.RemoveAll(dir)
			return nil, fmt.Errorf("weed mini exited at start-up:\n%s", tail(out, 4000))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := s.Client.ListBuckets(ctx)
		cancel()
		if err == nil {
			return s, nil
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(s.log)
			s.kill()
			return nil, fmt.Errorf("weed mini's S3 API did not answer within %s (last: %v):\n%s", startTimeout, err, tail(out, 4000))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// kill stops the server and removes its directory.
func (s *Server) kill() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
	os.RemoveAll(s.dir)
}

// removeAbandoned deletes the directories of servers whose test binary has exited (their weed
// died with it).
func removeAbandoned() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range dirs {
		raw, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil || processAlive(pid) {
			continue
		}
		os.RemoveAll(dir)
	}
}

func processAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	return err == nil && p.Signal(syscall.Signal(0)) == nil
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for len(ports) < n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
