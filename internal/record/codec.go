package record

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
)

// A record is read and written on every hand-over, claim and release,
// often as the first thing a process does after a long idle wait, where
// encoding/json's reflection runs cold. encode and decode take a direct
// path for the records this package writes — plain strings (printable
// ASCII with nothing to escape), fields in their order — and fall back
// to encoding/json for anything else. Both paths give byte for byte the
// same records and the same values (TestCodecMatchesJSON, FuzzDecode).

// encode is json.Marshal(r).
func encode(r record) []byte {
	if !plain(r.ID) || !plain(r.Key) {
		b, _ := json.Marshal(r) // cannot fail: plain fields
		return b
	}
	n := len(`{"v":,"id":"","priority":}`) + 20 + 20 + len(r.ID)
	if len(r.Value) > 0 {
		n += len(`,"value":""`) + base64.StdEncoding.EncodedLen(len(r.Value))
	}
	if r.Key != "" {
		n += len(`,"key":""`) + len(r.Key)
	}
	if r.Head {
		n += len(`,"head":true`)
	}
	b := make([]byte, 0, n)
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(r.V), 10)
	b = append(b, `,"id":"`...)
	b = append(b, r.ID...)
	b = append(b, `","priority":`...)
	b = strconv.AppendInt(b, r.Priority, 10)
	if len(r.Value) > 0 {
		b = append(b, `,"value":"`...)
		b = base64.StdEncoding.AppendEncode(b, r.Value)
		b = append(b, '"')
	}
	if r.Key != "" {
		b = append(b, `,"key":"`...)
		b = append(b, r.Key...)
		b = append(b, '"')
	}
	if r.Head {
		b = append(b, `,"head":true`...)
	}
	return append(b, '}')
}

// plain reports whether s is a JSON string's content as encoding/json
// writes it and reads it back unchanged: printable ASCII, without the
// characters it escapes (a quote, a backslash, and <, > and & for HTML).
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// decode is json.Unmarshal(data, &r).
func decode(data []byte) (record, error) {
	if r, ok := decodePlain(data); ok {
		return r, nil
	}
	var r record
	err := json.Unmarshal(data, &r)
	return r, err
}

// decodePlain reads a record in the form encode writes with plain
// strings; ok is false for anything else, which encoding/json reads.
func decodePlain(data []byte) (r record, ok bool) {
	p := parser{data: data}
	if !p.lit(`{"v":`) {
		return record{}, false
	}
	v, ok := p.int()
	if !ok || v != int64(int(v)) || !p.lit(`,"id":"`) {
		return record{}, false
	}
	r.V = int(v)
	if r.ID, ok = p.str(); !ok || !p.lit(`,"priority":`) {
		return record{}, false
	}
	if r.Priority, ok = p.int(); !ok {
		return record{}, false
	}
	if p.lit(`,"value":"`) {
		s, ok := p.str()
		if !ok || s == "" {
			return record{}, false
		}
		if r.Value, ok = decodeBase64(s); !ok {
			return record{}, false
		}
	}
	if p.lit(`,"key":"`) {
		if r.Key, ok = p.str(); !ok || r.Key == "" {
			return record{}, false
		}
	}
	r.Head = p.lit(`,"head":true`)
	if !p.lit("}") || p.i != len(data) {
		return record{}, false
	}
	return r, true
}

func decodeBase64(s string) ([]byte, bool) {
	b, err := base64.StdEncoding.DecodeString(s)
	return b, err == nil
}

type parser struct {
	data []byte
	i    int
}

// lit consumes s if the input goes on with it.
func (p *parser) lit(s string) bool {
	if len(p.data)-p.i < len(s) || string(p.data[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

// int consumes an integer as strconv.AppendInt writes it.
func (p *parser) int() (int64, bool) {
	start := p.i
	if p.i < len(p.data) && p.data[p.i] == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.data) && p.data[p.i] >= '0' && p.data[p.i] <= '9' {
		p.i++
	}
	if p.i == digits || (p.data[digits] == '0' && p.i-digits > 1) || string(p.data[start:p.i]) == "-0" {
		return 0, false
	}
	n, err := strconv.ParseInt(string(p.data[start:p.i]), 10, 64)
	return n, err == nil
}

// str consumes a plain string's content and its closing quote.
func (p *parser) str() (string, bool) {
	start := p.i
	for p.i < len(p.data) && p.data[p.i] != '"' {
		switch c := p.data[p.i]; {
		case c < 0x20 || c > 0x7e, c == '\\':
			return "", false
		}
		p.i++
	}
	if p.i == len(p.data) {
		return "", false
	}
	s := string(p.data[start:p.i])
	p.i++
	return s, true
}
