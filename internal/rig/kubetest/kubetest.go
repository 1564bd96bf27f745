// Package kubetest is a test rig, not part of the library: a
// kube-apiserver child process on loopback over an etcd embedded in the
// calling process, for backend/kube's real-server tests
// (backend/kube/kubesuite), the benchmark harness and the nemesis. The
// API server is the kube-apiserver of k8s.io/kubernetes, built from
// source by the module in backend/kube/kubesuite/kubeapiserver (make
// kube-apiserver), named by the environment variable KUBE_APISERVER.
package kubetest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/electkit/election/internal/rig/embedetcd"
)

// Tokens of the users the server knows (--token-auth-file): Admin is in
// system:masters; Limited is in no group and may do what RBAC grants it.
const (
	AdminToken   = "admin-token"
	LimitedToken = "limited-token"
	LimitedUser  = "limited"
)

// StartTimeout bounds a start of the API server until it is ready.
const StartTimeout = 90 * time.Second

// Server is a kube-apiserver child process on loopback with an etcd
// embedded in this process.
type Server struct {
	Addr string // host:port of the API server (https)

	bin, dir string
	etcd     *embedetcd.Server
	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	log      *os.File
}

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

// Binary returns the kube-apiserver to run: $KUBE_APISERVER, or one built
// now from the module backend/kube/kubesuite/kubeapiserver of the clone
// this file is in (cached by the Go build cache).
func Binary() (string, error) {
	if b := os.Getenv("KUBE_APISERVER"); b != "" {
		if _, err := os.Stat(b); err != nil {
			return "", fmt.Errorf("kubetest: KUBE_APISERVER=%s: %w", b, err)
		}
		return b, nil
	}
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		dir, err := os.MkdirTemp("", "kube-apiserver-")
		if err != nil {
			buildErr = err
			return
		}
		buildBin = filepath.Join(dir, "kube-apiserver")
		cmd := exec.Command("go", "build", "-o", buildBin, "k8s.io/kubernetes/cmd/kube-apiserver")
		cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..", "..", "backend", "kube", "kubesuite", "kubeapiserver")
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("kubetest: building kube-apiserver in %s: %v\n%s", cmd.Dir, err, out)
		}
	})
	return buildBin, buildErr
}

// Start starts etcd and the API server in dir and waits until it is ready.
func Start(dir string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	etcd, err := embedetcd.Start(embedetcd.Config{Dir: filepath.Join(dir, "etcd")})
	if err != nil {
		return nil, fmt.Errorf("kubetest: starting etcd: %w", err)
	}
	s := &Server{bin: bin, dir: dir, etcd: etcd}
	if err := s.files(); err != nil {
		etcd.Close()
		return nil, err
	}
	var last error
	for range 3 { // a port taken between choosing it and the bind: choose again
		port, err := freePort()
		if err != nil {
			etcd.Close()
			return nil, err
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if last = s.start(); last == nil {
			return s, nil
		}
	}
	etcd.Close()
	return nil, last
}

// files writes the service-account key and the token file.
func (s *Server) files() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.dir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return err
	}
	tokens := AdminToken + ",admin,admin,system:masters\n" + LimitedToken + "," + LimitedUser + "," + LimitedUser + "\n"
	return os.WriteFile(filepath.Join(s.dir, "tokens.csv"), []byte(tokens), 0o600)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs the API server on s.Addr and waits until /readyz answers.
func (s *Server) start() error {
	_, port, _ := net.SplitHostPort(s.Addr)
	key := filepath.Join(s.dir, "sa.key")
	log, err := os.OpenFile(filepath.Join(s.dir, "kube-apiserver.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin,
		"--etcd-servers="+s.etcd.Endpoints()[0],
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+port,
		"--cert-dir="+filepath.Join(s.dir, "certs"),
		"--service-account-key-file="+key,
		"--service-account-signing-key-file="+key,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--token-auth-file="+filepath.Join(s.dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--endpoint-reconciler-type=none",
	)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the tests
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("kubetest: starting %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); log.Close(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited, s.log = cmd, exited, log
	s.mu.Unlock()
	if err := s.waitReady(exited); err != nil {
		s.Stop()
		tail, _ := os.ReadFile(filepath.Join(s.dir, "kube-apiserver.log"))
		if len(tail) > 4000 {
			tail = tail[len(tail)-4000:]
		}
		return fmt.Errorf("%w; its log ends:\n%s", err, bytes.TrimSpace(tail))
	}
	return nil
}

// waitReady polls /readyz until it answers 200, the process exits, or
// StartTimeout passes.
func (s *Server) waitReady(exited <-chan struct{}) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer hc.CloseIdleConnections()
	deadline := time.NewTimer(StartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequest(http.MethodGet, "https://"+s.Addr+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+AdminToken)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("kubetest: kube-apiserver exited before it was ready")
		case <-deadline.C:
			return fmt.Errorf("kubetest: kube-apiserver not ready within %v", StartTimeout)
		case <-tick.C:
		}
	}
}

// Stop stops the API server (SIGTERM, then SIGKILL after 10 s) and waits
// for it; etcd keeps running.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Kill kills the API server (SIGKILL: no graceful shutdown, as a crash)
// and waits for it; etcd keeps running.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

// Restart stops the API server and starts it again on the same address.
func (s *Server) Restart() error {
	s.Stop()
	return s.start()
}

// Resume starts the API server Stop or Kill stopped again, on the same
// address, and waits until it is ready.
func (s *Server) Resume() error {
	if s.Running() {
		return errors.New("kubetest: the kube-apiserver is running")
	}
	return s.start()
}

// Running reports whether the API server's process runs (started, and
// neither stopped nor exited).
func (s *Server) Running() bool {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil {
		return false
	}
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// Close stops the API server and etcd.
func (s *Server) Close() {
	s.Stop()
	s.etcd.Close()
}

// Config returns a client config for the server at addr (the server's, or
// a proxy's in front of it) with token. Its rate limit is off: tests make
// bursts of requests client-go's default (5 per second) would queue.
func Config(addr, token string) *rest.Config {
	return &rest.Config{
		Host:            "https://" + addr,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             -1,
		Timeout:         0,
	}
}

// Client returns a clientset for Config(addr, token).
func Client(addr, token string) (*kubernetes.Clientset, error) {
	return kubernetes.NewForConfig(Config(addr, token))
}

// Ready waits until the server answers a request of cs, for at most d.
func Ready(ctx context.Context, cs kubernetes.Interface, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := cs.Discovery().ServerVersion()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubetest: server not answering within %v: %w", d, err)
		case <-tick.C:
		}
	}
}
