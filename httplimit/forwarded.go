package httplimit

import (
	"net/netip"
	"strings"
)

// forwardedList splits the lines of X-Forwarded-For into one list of
// entries, in order, dropping empty list elements (RFC 9110, 5.6.1).
func forwardedList(lines []string) []string {
	var hops []string
	for _, line := range lines {
		for e := range strings.SplitSeq(line, ",") {
			if e = strings.Trim(e, " \t"); e != "" {
				hops = append(hops, e)
			}
		}
	}
	return hops
}

// forwardedFor returns the for= value of every element of the RFC 7239
// Forwarded field, whose lines form one list. An element with no for=, two
// of them, or a syntax error yields "", which parseNode rejects; empty
// elements are dropped.
func forwardedFor(lines []string) []string {
	var hops []string
	for _, line := range lines {
		p := fwdParser{s: line}
		for !p.done() {
			if v, ok, empty := p.element(); !empty {
				if !ok {
					v = ""
				}
				hops = append(hops, v)
			}
		}
	}
	return hops
}

// fwdParser reads the elements of one Forwarded line:
//
//	Forwarded         = 1#forwarded-element
//	forwarded-element = [ forwarded-pair ] *( ";" [ forwarded-pair ] )
//	forwarded-pair    = token "=" value
//	value             = token / quoted-string
//
// It is lenient where that costs nothing: whitespace around ';' and '=',
// and unquoted values holding ':' or brackets, as some proxies send.
type fwdParser struct {
	s string
	i int
}

func (p *fwdParser) done() bool { return p.i >= len(p.s) }

func (p *fwdParser) skipSpace() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// element reads one element and the ',' after it. It returns the for=
// value, whether the element was well formed with exactly one for=, and
// whether it was empty.
func (p *fwdParser) element() (forValue string, ok, empty bool) {
	empty, ok = true, true
	fors := 0
	for {
		p.skipSpace()
		if p.done() {
			break
		}
		switch p.s[p.i] {
		case ',':
			p.i++
			return forValue, ok && fors == 1, empty
		case ';':
			p.i++
			continue
		}
		empty = false
		name, value, good := p.pair()
		if !good {
			ok = false
			p.skipPair()
			continue
		}
		if strings.EqualFold(name, "for") {
			fors++
			forValue = value
		}
	}
	return forValue, ok && fors == 1, empty
}

// pair reads token "=" value.
func (p *fwdParser) pair() (name, value string, ok bool) {
	start := p.i
	for p.i < len(p.s) && isTokenChar(p.s[p.i]) {
		p.i++
	}
	name = p.s[start:p.i]
	p.skipSpace()
	if name == "" || p.done() || p.s[p.i] != '=' {
		return "", "", false
	}
	p.i++
	p.skipSpace()
	if !p.done() && p.s[p.i] == '"' {
		value, ok = p.quoted()
		return name, value, ok
	}
	start = p.i
	for p.i < len(p.s) && !strings.ContainsRune(",; \t\"", rune(p.s[p.i])) {
		p.i++
	}
	return name, p.s[start:p.i], p.i > start
}

// quoted reads a quoted-string, p.i at its opening quote.
func (p *fwdParser) quoted() (string, bool) {
	var b strings.Builder
	for p.i++; p.i < len(p.s); p.i++ {
		switch c := p.s[p.i]; c {
		case '"':
			p.i++
			return b.String(), true
		case '\\':
			p.i++
			if p.i == len(p.s) {
				return "", false
			}
			b.WriteByte(p.s[p.i])
		default:
			b.WriteByte(c)
		}
	}
	return "", false
}

// skipPair moves past the rest of a bad pair, to the next ';' or ','
// outside quotes.
func (p *fwdParser) skipPair() {
	for !p.done() {
		switch p.s[p.i] {
		case ';', ',':
			return
		case '"':
			p.quoted()
		default:
			p.i++
		}
	}
}

// isTokenChar reports whether c is a tchar of RFC 9110.
func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// parseNode parses one hop: an IP address with or without a port, IPv6 in
// brackets when a port follows ("[2001:db8::1]:443") and optionally when
// none does; the port may be an RFC 7239 obfuscated one ("_a1"). It
// returns the address unmapped and without a zone.
func parseNode(s string) (netip.Addr, bool) {
	s = strings.Trim(s, " \t")
	host := s
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 || !validPort(s[end+1:], true) {
			return netip.Addr{}, false
		}
		host = s[1:end]
	} else if strings.Count(s, ":") == 1 { // IPv4 with a port
		i := strings.IndexByte(s, ':')
		if !validPort(s[i:], false) {
			return netip.Addr{}, false
		}
		host = s[:i]
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// validPort reports whether s is "" (when empty is allowed) or ":" and a
// port: 1 to 5 digits, or "_" and an obfuscated identifier.
func validPort(s string, empty bool) bool {
	if s == "" {
		return empty
	}
	if s[0] != ':' || len(s) == 1 {
		return false
	}
	s = s[1:]
	if s[0] == '_' {
		for i := 1; i < len(s); i++ {
			c := s[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
				return false
			}
		}
		return len(s) > 1
	}
	if len(s) > 5 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
