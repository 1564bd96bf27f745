package backend

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/electkit/election"
)

// MaxNameLen bounds an election's name, in bytes.
const MaxNameLen = 256

// exampleName is the name the refusals suggest when the given one cannot
// be mended by a single change.
const exampleName = "/services/demo"

// ValidateName reports whether name is a valid election name, the same for
// every backend: an absolute slash-separated path such as "/services/demo",
// with at least one segment, no trailing "/", no empty ("//"), "." or ".."
// segment, and segments of ASCII letters, digits, '.', '_' and '-' only. A
// segment that begins with "_" is reserved for the backends' own keys and
// nodes, and the first segment "zookeeper" for ZooKeeper's; names are at
// most MaxNameLen bytes. A refused name gets an *election.OptionError with
// Field "name", which wraps election.ErrInvalidOption; its reason names the
// fault and, where one change mends it, the name that would do.
//
// A backend may put its own absolute prefix before a valid name (the
// result is still one); it never trims, cleans or completes a name.
func ValidateName(name string) error {
	bad := func(reason string) error {
		return &election.OptionError{Field: "name", Value: QuoteValue(name), Reason: reason}
	}
	switch {
	case name == "":
		return bad(fmt.Sprintf("must not be empty; use an absolute path such as %q", exampleName))
	case len(name) > MaxNameLen:
		return bad(fmt.Sprintf("is %d bytes, more than MaxNameLen (%d)", len(name), MaxNameLen))
	case name[0] != '/':
		return bad("must be an absolute path such as " + suggest("/"+name))
	case name == "/":
		return bad(fmt.Sprintf("must name at least one segment below \"/\", such as %q", exampleName))
	case strings.HasSuffix(name, "/"):
		return bad("must not end with \"/\"; use " + suggest(strings.TrimRight(name, "/")))
	}
	off := 1 // the byte offset of seg in name
	for i, seg := range strings.Split(name[1:], "/") {
		switch {
		case seg == "":
			return bad(fmt.Sprintf("has an empty segment (\"//\") at byte %d; use %s", off-1, suggest(cleanSlashes(name))))
		case seg == "." || seg == "..":
			return bad(fmt.Sprintf("has a %q segment at byte %d; names are not resolved, so spell the path out", seg, off))
		}
		if j := strings.IndexFunc(seg, func(r rune) bool { return !isNameChar(r) }); j >= 0 {
			_, n := utf8.DecodeRuneInString(seg[j:]) // the whole character, not its first byte
			return bad(fmt.Sprintf("has %s at byte %d; segments allow only ASCII letters, digits and . _ -", strconv.Quote(seg[j:j+n]), off+j))
		}
		switch {
		case seg[0] == '_':
			return bad(fmt.Sprintf("segment %s begins with \"_\", which is reserved for the backends' own keys and nodes", QuoteValue(seg)))
		case i == 0 && seg == "zookeeper":
			return bad("must not be under \"/zookeeper\", which ZooKeeper reserves")
		}
		off += len(seg) + 1
	}
	return nil
}

// suggest quotes a mended name if it is valid, or else the example name.
func suggest(mended string) string {
	if ValidateName(mended) == nil {
		return strconv.Quote(mended)
	}
	return strconv.Quote(exampleName)
}

// cleanSlashes folds runs of "/" into one and drops a trailing one.
func cleanSlashes(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		if name[i] == '/' && i > 0 && name[i-1] == '/' {
			continue
		}
		b.WriteByte(name[i])
	}
	return strings.TrimRight(b.String(), "/")
}

func isNameChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
}
