package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/etcd"
)

// passwordEnv holds the etcd password. It is not a flag on purpose: a
// password on the command line is visible to every user of the machine
// (ps, /proc/PID/cmdline). --password-file is the other way to give it.
const passwordEnv = envPrefix + "PASSWORD"

// etcdConn is the etcd backend's flags.
type etcdConn struct {
	endpoints    string
	cacert       string
	cert, key    string
	user         string
	passwordFile string
	dialTimeout  time.Duration
}

func etcdFlags(f *flagSet, _ bool) opener {
	c := &etcdConn{}
	f.String(&c.endpoints, "endpoints", "LIST", "127.0.0.1:2379", "etcd: comma-separated host:port or http(s):// URLs")
	f.String(&c.cacert, "cacert", "FILE", "", "etcd: verify the server with this CA certificate (PEM); turns on TLS")
	f.String(&c.cert, "cert", "FILE", "", "etcd: client certificate (PEM) to present; needs --key; turns on TLS")
	f.String(&c.key, "key", "FILE", "", "etcd: private key (PEM) of --cert")
	f.String(&c.user, "user", "NAME", "", "etcd: user name; the password comes from "+passwordEnv+" or --password-file, never from the command line")
	f.String(&c.passwordFile, "password-file", "FILE", "", "etcd: file holding the password of --user (one line)")
	f.Duration(&c.dialTimeout, "dial-timeout", "D", 5*time.Second, "etcd: how long to wait for the cluster to answer at start")
	return c.open
}

// config checks the flags and returns the client configuration they give.
func (c *etcdConn) config(f *flagSet) (clientv3.Config, error) {
	cfg := clientv3.Config{DialTimeout: c.dialTimeout, Logger: zap.NewNop()}
	if c.dialTimeout <= 0 {
		return cfg, f.Bad("dial-timeout", "must be positive")
	}
	secure, plain := false, false
	for _, ep := range strings.Split(c.endpoints, ",") {
		ep = strings.TrimSpace(ep)
		if ep == "" {
			return cfg, f.Bad("endpoints", "an endpoint is empty")
		}
		host := ep
		if strings.Contains(ep, "://") {
			u, err := url.Parse(ep)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
				return cfg, f.Bad("endpoints", "%q is neither host:port nor an http:// or https:// URL", ep)
			}
			if u.Scheme == "https" {
				secure = true
			} else {
				plain = true
			}
			if secure && plain {
				return cfg, f.Bad("endpoints", "mixes http:// and https:// endpoints")
			}
			host = u.Host
		}
		h, port, err := net.SplitHostPort(host)
		if n, perr := strconv.Atoi(port); err != nil || h == "" || perr != nil || n < 1 || n > 65535 {
			return cfg, f.Bad("endpoints", "%q is not host:port (e.g. 127.0.0.1:2379)", ep)
		}
		cfg.Endpoints = append(cfg.Endpoints, ep)
	}
	tc, err := c.tlsConfig(f)
	if err != nil {
		return cfg, err
	}
	if tc != nil || secure {
		if tc == nil {
			tc = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		cfg.TLS = tc
	}
	user, password, err := c.credentials(f)
	if err != nil {
		return cfg, err
	}
	cfg.Username, cfg.Password = user, password
	return cfg, nil
}

// tlsConfig loads the TLS files, or returns nil when none is given.
func (c *etcdConn) tlsConfig(f *flagSet) (*tls.Config, error) {
	if c.cacert == "" && c.cert == "" && c.key == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.cacert != "" {
		pem, err := os.ReadFile(c.cacert)
		if err != nil {
			return nil, f.Bad("cacert", "%v", unwrapPath(err))
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, f.Bad("cacert", "holds no PEM certificate")
		}
	}
	switch {
	case c.cert == "" && c.key != "":
		return nil, f.Bad("key", "needs --cert too")
	case c.cert != "" && c.key == "":
		return nil, f.Bad("cert", "needs --key too")
	case c.cert != "":
		for _, name := range []string{"cert", "key"} {
			path := map[string]string{"cert": c.cert, "key": c.key}[name]
			if _, err := os.Stat(path); err != nil {
				return nil, f.Bad(name, "%v", unwrapPath(err))
			}
		}
		pair, err := tls.LoadX509KeyPair(c.cert, c.key)
		if err != nil {
			return nil, f.Bad("cert", "with --key=%s: %v", c.key, err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// credentials returns the user and the password: from ELECTION_PASSWORD
// or --password-file, never from the command line.
func (c *etcdConn) credentials(f *flagSet) (user, password string, err error) {
	envPassword, envSet := osLookupEnv(passwordEnv)
	switch {
	case c.user == "" && c.passwordFile != "":
		return "", "", f.Bad("password-file", "is for --user, which is not set")
	case c.user == "" && envSet:
		return "", "", usagef("%s is set but --user is not", passwordEnv)
	case c.user == "":
		return "", "", nil
	case strings.Contains(c.user, ":"):
		return "", "", f.Bad("user", "has a colon: give the password in %s or --password-file, not on the command line", passwordEnv)
	case c.passwordFile != "" && envSet:
		return "", "", usagef("both %s and --password-file give a password: keep one", passwordEnv)
	case c.passwordFile != "":
		b, err := os.ReadFile(c.passwordFile)
		if err != nil {
			return "", "", f.Bad("password-file", "%v", unwrapPath(err))
		}
		password = strings.TrimRight(string(b), "\r\n")
		if password == "" {
			return "", "", f.Bad("password-file", "is empty")
		}
		return c.user, password, nil
	case envSet:
		return c.user, envPassword, nil
	}
	return "", "", f.Bad("user", "needs a password: set %s or --password-file", passwordEnv)
}

// unwrapPath drops the path from an *os.PathError: the flag already names it.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// open dials etcd, checks that it answers within --dial-timeout, and
// returns a candidate of the election.
func (c *etcdConn) open(ctx context.Context, f *flagSet, name string, opts []election.Option) (election.Elector, func() error, error) {
	cfg, err := c.config(f)
	if err != nil {
		return nil, nil, err
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to etcd at %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	e, err := etcd.New(cli, name, opts...)
	if err != nil {
		cli.Close()
		var oe *election.OptionError
		if errors.As(err, &oe) && oe.Field == "name" {
			return nil, nil, f.Bad("name", "%s", oe.Reason)
		}
		return nil, nil, err
	}
	// One read of the election: the cluster answers, and the user may
	// read the election's keys.
	rctx, cancel := context.WithTimeout(ctx, c.dialTimeout)
	_, err = e.Leader(rctx)
	cancel()
	if err != nil && !errors.Is(err, election.ErrNoLeader) {
		e.Close()
		cli.Close()
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within --dial-timeout=%v", c.dialTimeout)
		}
		return nil, nil, fmt.Errorf("etcd at %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	return e, func() error {
		err := e.Close()
		if cerr := cli.Close(); cerr != nil && !errors.Is(cerr, context.Canceled) {
			err = errors.Join(err, cerr)
		}
		return err
	}, nil
}
