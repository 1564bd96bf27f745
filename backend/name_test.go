package backend_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
)

func TestValidateNameAccepts(t *testing.T) {
	for _, name := range []string{
		"/a",
		"/services/demo",
		"/a/b/c",
		"/Svc-1/sched_2/v1.0",
		"/a.b/c-d/e_f",
		"/zookeeper2",
		"/zoo/zookeeper",
		"/ZooKeeper",
		"/..a/b..",
		"/a_/b_c",
		"/" + strings.Repeat("x", backend.MaxNameLen-1),
		strings.Repeat("/abc", backend.MaxNameLen/4),
	} {
		if err := backend.ValidateName(name); err != nil {
			t.Errorf("ValidateName(%q) = %v, want nil", name, err)
		}
	}
}

func TestValidateNameRefuses(t *testing.T) {
	long := "/" + strings.Repeat("x", backend.MaxNameLen)
	for _, tc := range []struct {
		name, reason string
	}{
		{"", `must not be empty; use an absolute path such as "/services/demo"`},
		{"services/demo", `must be an absolute path such as "/services/demo"`},
		{"demo", `must be an absolute path such as "/demo"`},
		{"a/_b", `must be an absolute path such as "/services/demo"`},
		{"/", `must name at least one segment below "/", such as "/services/demo"`},
		{"//", `must not end with "/"; use "/services/demo"`},
		{"/a/", `must not end with "/"; use "/a"`},
		{"/a/b//", `must not end with "/"; use "/a/b"`},
		{"/a//b", `has an empty segment ("//") at byte 2; use "/a/b"`},
		{"//a", `has an empty segment ("//") at byte 0; use "/a"`},
		{"/a/./b", `has a "." segment at byte 3; names are not resolved, so spell the path out`},
		{"/a/..", `has a ".." segment at byte 3; names are not resolved, so spell the path out`},
		{"/a b", `has " " at byte 2; segments allow only ASCII letters, digits and . _ -`},
		{"/a/b:c", `has ":" at byte 4; segments allow only ASCII letters, digits and . _ -`},
		{"/a/é", `has "é" at byte 3; segments allow only ASCII letters, digits and . _ -`},
		{"/a\x00", `has "\x00" at byte 2; segments allow only ASCII letters, digits and . _ -`},
		{"/a\xff", `has "\xff" at byte 2; segments allow only ASCII letters, digits and . _ -`},
		{"/_l", `segment "_l" begins with "_", which is reserved for the backends' own keys and nodes`},
		{"/a/_c/b", `segment "_c" begins with "_", which is reserved for the backends' own keys and nodes`},
		{"/zookeeper", `must not be under "/zookeeper", which ZooKeeper reserves`},
		{"/zookeeper/quota", `must not be under "/zookeeper", which ZooKeeper reserves`},
		{long, `is 257 bytes, more than MaxNameLen (256)`},
		{strings.Repeat("x", backend.MaxNameLen), `must be an absolute path such as "/services/demo"`},
	} {
		err := backend.ValidateName(tc.name)
		var oe *election.OptionError
		if !errors.As(err, &oe) {
			t.Errorf("ValidateName(%q) = %v, want an *election.OptionError", tc.name, err)
			continue
		}
		if !errors.Is(err, election.ErrInvalidOption) {
			t.Errorf("ValidateName(%q) = %v, does not wrap ErrInvalidOption", tc.name, err)
		}
		if oe.Field != "name" || oe.Value != backend.QuoteValue(tc.name) || oe.Reason != tc.reason {
			t.Errorf("ValidateName(%q) = {Field: %q, Value: %s, Reason: %s}\nwant {Field: \"name\", Value: %s, Reason: %s}",
				tc.name, oe.Field, oe.Value, oe.Reason, backend.QuoteValue(tc.name), tc.reason)
		}
	}
}

func TestValidateNameMessage(t *testing.T) {
	err := backend.ValidateName("services/demo")
	want := `election: invalid option name = "services/demo": must be an absolute path such as "/services/demo"`
	if err == nil || err.Error() != want {
		t.Fatalf("ValidateName(\"services/demo\") = %v, want %s", err, want)
	}
}
