package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/zk"
)

// zkPasswordEnv holds the ZooKeeper digest password; like etcd's, never a
// flag.
const zkPasswordEnv = envPrefix + "ZK_PASSWORD"

// zkConn is the ZooKeeper backend's flags.
type zkConn struct {
	servers      string
	user         string
	passwordFile string
	connTimeout  time.Duration
	hold         bool
}

func zkFlags(f *flagSet, candidate bool) opener {
	c := &zkConn{}
	f.String(&c.servers, "servers", "LIST", "127.0.0.1:2181", "zk: comma-separated host:port of the ensemble's servers")
	f.String(&c.user, "zk-user", "NAME", "", "zk: digest user; the password comes from "+zkPasswordEnv+" or --zk-password-file")
	f.String(&c.passwordFile, "zk-password-file", "FILE", "", "zk: file holding the password of --zk-user (one line)")
	f.Duration(&c.connTimeout, "zk-connect-timeout", "D", 10*time.Second, "zk: how long to wait for a session at start")
	if candidate {
		// How a leader behaves while disconnected: nothing to observe,
		// leader or transfer, which never lead.
		f.Bool(&c.hold, "zk-hold", false, "zk: while disconnected, lead on until the session may have expired (HoldUntilDeadline) instead of stepping down at once")
	}
	return c.open
}

func (c *zkConn) config(f *flagSet) (zk.DialConfig, error) {
	var dc zk.DialConfig
	if c.connTimeout <= 0 {
		return dc, f.Bad("zk-connect-timeout", "must be positive")
	}
	for _, s := range strings.Split(c.servers, ",") {
		s = strings.TrimSpace(s)
		if s == "" || !strings.Contains(s, ":") {
			return dc, f.Bad("servers", "%q is not host:port (e.g. 127.0.0.1:2181)", s)
		}
		dc.Servers = append(dc.Servers, s)
	}
	if c.hold {
		dc.Policy = zk.HoldUntilDeadline
	}
	envPassword, envSet := osLookupEnv(zkPasswordEnv)
	switch {
	case c.user == "" && c.passwordFile != "":
		return dc, f.Bad("zk-password-file", "is for --zk-user, which is not set")
	case c.user == "" && envSet:
		return dc, usagef("%s is set but --zk-user is not", zkPasswordEnv)
	case c.user == "":
	case strings.Contains(c.user, ":"):
		return dc, f.Bad("zk-user", "has a colon: give the password in %s or --zk-password-file", zkPasswordEnv)
	case c.passwordFile != "" && envSet:
		return dc, usagef("both %s and --zk-password-file give a password: keep one", zkPasswordEnv)
	case c.passwordFile != "":
		b, err := os.ReadFile(c.passwordFile)
		if err != nil {
			return dc, f.Bad("zk-password-file", "%v", unwrapPath(err))
		}
		pw := strings.TrimRight(string(b), "\r\n")
		if pw == "" {
			return dc, f.Bad("zk-password-file", "is empty")
		}
		dc.Digest = c.user + ":" + pw
	case envSet:
		dc.Digest = c.user + ":" + envPassword
	default:
		return dc, f.Bad("zk-user", "needs a password: set %s or --zk-password-file", zkPasswordEnv)
	}
	return dc, nil
}

// open connects with a session timeout of --ttl and returns a candidate of
// the election at the path --name.
func (c *zkConn) open(ctx context.Context, f *flagSet, name string, opts []election.Option) (election.Elector, func() error, error) {
	dc, err := c.config(f)
	if err != nil {
		return nil, nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, c.connTimeout)
	defer cancel()
	e, err := zk.Dial(dctx, dc, name, opts...)
	if err != nil {
		var oe *election.OptionError
		if errors.As(err, &oe) && oe.Field == "name" {
			return nil, nil, f.Bad("name", "%s", oe.Reason)
		}
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no session within --zk-connect-timeout=%v", c.connTimeout)
		}
		return nil, nil, fmt.Errorf("ZooKeeper at %s: %w", strings.Join(dc.Servers, ","), err)
	}
	rctx, rcancel := context.WithTimeout(ctx, c.connTimeout)
	_, err = e.Leader(rctx)
	rcancel()
	if err != nil && !errors.Is(err, election.ErrNoLeader) {
		e.Close()
		return nil, nil, fmt.Errorf("ZooKeeper at %s: %w", strings.Join(dc.Servers, ","), err)
	}
	return e, e.Close, nil
}
