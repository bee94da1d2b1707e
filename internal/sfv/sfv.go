// Package sfv writes the pieces of the IETF RateLimit fields
// (draft-ietf-httpapi-ratelimit-headers) that httplimit and grpclimit share:
// Structured Field strings (RFC 8941) and durations in whole seconds.
package sfv

import "time"

// AppendString appends s as a Structured Field sf-string (RFC 8941,
// 3.3.3): quoted, with '"' and '\' escaped. An sf-string holds printable
// ASCII only, so every other byte, and '%', is written as %XX.
func AppendString(b []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e || c == '%':
			b = append(b, '%', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// CeilSeconds returns d in whole seconds, rounded up; 0 for d <= 0.
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}
