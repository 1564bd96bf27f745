package backend

import (
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/electkit/election/internal/termbridge"
)

// ValidateID reports whether id is a valid candidate ID: 1 to
// election.MaxIDLen bytes of election.IDChars, starting with a letter or a
// digit. It returns the *election.OptionError (Field "ID") that
// election.NewOptions returns for it. A backend checks every ID it reads
// back from the store with it, so that a foreign or damaged record never
// becomes a leader.
func ValidateID(id string) error { return termbridge.ValidateID(id) }

// MaxQuotedLen bounds how much of a refused value QuoteValue shows.
const MaxQuotedLen = 64

// QuoteValue formats a refused string for an election.OptionError's Value:
// quoted, and cut to its first MaxQuotedLen bytes (at a character boundary)
// with its length when it is longer, so that an error about a 1 KiB name
// does not carry the whole name.
func QuoteValue(s string) string {
	if len(s) <= MaxQuotedLen {
		return strconv.Quote(s)
	}
	cut := s[:MaxQuotedLen]
	for len(cut) > 0 && !utf8.ValidString(cut) {
		cut = cut[:len(cut)-1]
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(cut), len(s))
}
