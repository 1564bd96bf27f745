package harness

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/electkit/election/internal/rig/faultproxy"
)

// proc is one candidate process the harness started, with its own TCP
// proxies: one per store member, in member order.
type proc struct {
	id      string
	cmd     *exec.Cmd
	proxies []*faultproxy.Proxy
	exited  chan struct{}
	ctl     io.WriteCloser // the process's stdin: its control stream (see skewClock)

	mu     sync.Mutex
	gone   bool // exited, or killed by the harness
	paused bool
}

// startProc starts candidate id as an OS process of r.cfg.Bin, connected to
// the store through fresh proxies (cut at once for the members in cut).
func (r *run) startProc(id string, priority int64) (*proc, error) {
	p := &proc{id: id, exited: make(chan struct{})}
	var eps []string
	for i, addr := range r.st.addrs() {
		px, err := faultproxy.Start(addr)
		if err != nil {
			p.closeProxies()
			return nil, fmt.Errorf("proxy to %s: %w", addr, err)
		}
		if r.storeCut[i] {
			px.Cut()
		}
		p.proxies = append(p.proxies, px)
		eps = append(eps, r.st.endpoint(px.Addr))
	}
	logf, err := os.OpenFile(filepath.Join(r.dir, "candidate-"+id+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.closeProxies()
		return nil, err
	}
	cmd := exec.Command(r.cfg.Bin, "nemesis-candidate",
		"--backend", r.cfg.Backend,
		"--endpoints", strings.Join(eps, ","),
		"--name", r.st.election(),
		"--id", id,
		"--ttl", r.cfg.TTL.String(),
		"--register", r.reg.Addr(),
		"--work", r.cfg.Work.String(),
		"--priority", fmt.Sprint(priority),
		"--preempt", PreemptHold(r.cfg.TTL).String(),
	)
	if OnSession(id) {
		cmd.Args = append(cmd.Args, "--session")
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	ctl, err := cmd.StdinPipe()
	if err != nil {
		logf.Close()
		p.closeProxies()
		return nil, err
	}
	p.ctl = ctl
	if r.cfg.Drift > 0 {
		cmd.Args = append(cmd.Args, "--drift", strconv.FormatFloat(r.cfg.Drift, 'g', -1, 64))
	}
	if r.cfg.Margin > 0 {
		cmd.Args = append(cmd.Args, "--margin", r.cfg.Margin.String())
	}
	if user, pw := r.st.credentials(); user != "" {
		cmd.Env = append(cmd.Environ(), EnvUser+"="+user, EnvPassword+"="+pw)
	}
	if r.sharded(id) { // on a session too (OnSession)
		cmd.Env = append(cmd.Environ(), fmt.Sprintf("%s=%d", EnvShards, r.cfg.Shards))
	}
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		p.closeProxies()
		return nil, fmt.Errorf("starting candidate %s: %w", id, err)
	}
	p.cmd = cmd
	go func() {
		_ = cmd.Wait()
		logf.Close()
		p.mu.Lock()
		p.gone = true
		p.mu.Unlock()
		close(p.exited)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// signal sends sig to the process, if the harness has not seen it exit.
func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gone {
		return fmt.Errorf("candidate %s has exited", p.id)
	}
	if sig == syscall.SIGSTOP {
		p.paused = true
	}
	if sig == syscall.SIGCONT {
		p.paused = false
	}
	return p.cmd.Process.Signal(sig)
}

// stop asks the process to end (SIGTERM, after SIGCONT if it is paused),
// waits up to grace, then kills it. The error says how it ended when that
// was not a clean exit within grace.
func (p *proc) stop(grace time.Duration) error {
	p.mu.Lock()
	paused := p.paused
	p.mu.Unlock()
	if paused {
		_ = p.signal(syscall.SIGCONT)
	}
	_ = p.signal(syscall.SIGTERM)
	var err error
	select {
	case <-p.exited:
		if st := p.cmd.ProcessState; st != nil && !st.Success() {
			err = fmt.Errorf("exited with %v", st)
		}
	case <-time.After(grace):
		_ = p.signal(syscall.SIGKILL)
		<-p.exited
		err = fmt.Errorf("did not exit within %v of SIGTERM: killed", grace)
	}
	p.closeProxies()
	return err
}

// setRate runs the library's clock in the process at rate × real time
// (the clock faults).
func (p *proc) setRate(rate float64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gone {
		return fmt.Errorf("candidate %s has exited", p.id)
	}
	_, err := fmt.Fprintf(p.ctl, "%s %s\n", controlRate, strconv.FormatFloat(rate, 'g', -1, 64))
	return err
}

func (p *proc) cut() {
	for _, px := range p.proxies {
		px.Cut()
	}
}

// heal closes the connections a cut left (their streams lost bytes) and
// forwards again.
func (p *proc) heal() {
	for _, px := range p.proxies {
		px.Reset()
		px.Heal()
	}
}

func (p *proc) closeProxies() {
	for _, px := range p.proxies {
		px.Close()
	}
}

// OnSession reports whether candidate id (c1, c2, …) of a store run
// campaigns on a session shared with a side election (CandidateConfig's
// Session): every even one, so both kinds run in every mix.
func OnSession(id string) bool {
	var n int
	_, err := fmt.Sscanf(id, "c%d", &n)
	return err == nil && n%2 == 0
}

// Sharded reports whether candidate id of a store run is shard-heavy:
// every fourth from c2 (c2, c6, …), a candidate on a session (OnSession) that
// holds Config.Shards side elections on it rather than one. The kind
// goes with the ID, which the seed's schedule gives, so a seed runs the
// same kinds of candidates.
func Sharded(id string) bool {
	var n int
	_, err := fmt.Sscanf(id, "c%d", &n)
	return err == nil && n%4 == 2
}

// sharded reports whether candidate id runs shard-heavy in this run.
func (r *run) sharded(id string) bool { return r.shards != nil && Sharded(id) }
