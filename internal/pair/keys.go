package pair

import (
	"strconv"
	"strings"
)

// Version names the format of the keys and of the values under them, so
// that a later format can roll out beside this one.
const Version = "v1"

// Keys are the Redis keys of one pair, by what each holds.
type Keys struct {
	Meters  []string // each kind of meter's, in the order of the letters they were made with
	Penalty string   // the penalty state (see lua/penalty.lua)
	Reset   string   // the time of the pair's last Reset (see lua/reset.lua)
	letters string
}

// Meter returns the key of the meter whose keys end in letter, one of the
// letters ks was made with.
func (ks Keys) Meter(letter byte) string {
	return ks.Meters[strings.IndexByte(ks.letters, letter)]
}

// RedisKeys returns the Redis keys of n: a meter's for each of letters
// (each once), the penalty state and the time of the last Reset. Each is
//
//	<prefix>v1:{<len>:<rule>:<kind><key>}:<letter>
//
// where <len> is the length of the escaped rule name, <kind> is '=' for a
// key kept as it is and '#' for a digest, <letter> is the meter's, 'p' or
// 'r', and '%' and '}' are escaped as %25 and %7D in the rule name and the
// key. The length makes the pair unambiguous (rule "x" key "a:b" differs
// from rule "x:a" key "b"); the escaping keeps the braces one hash tag, so
// all keys of a pair are in one Redis Cluster slot while different pairs
// spread over the slots. The strings share one allocation.
func RedisKeys(prefix string, n Name, letters string) Keys {
	one := KeyLen(prefix, n)
	all := letters + "pr"
	var b strings.Builder
	b.Grow(len(all) * one)
	for i := 0; i < len(all); i++ {
		WriteKey(&b, prefix, n, all[i])
	}
	s := b.String()
	key := func(i int) string { return s[i*one : (i+1)*one] }
	ks := Keys{Meters: make([]string, len(letters)), Penalty: key(len(letters)), Reset: key(len(letters) + 1), letters: letters}
	for i := range ks.Meters {
		ks.Meters[i] = key(i)
	}
	return ks
}

// IDKey returns the key of n that ends in kind (see WriteKey), ':' and id:
// in the hash tag of n's other keys, so that one script may touch them all
// on a Redis Cluster.
func IDKey(prefix string, n Name, kind byte, id string) string {
	var b strings.Builder
	b.Grow(KeyLen(prefix, n) + 1 + len(id))
	WriteKey(&b, prefix, n, kind)
	b.WriteByte(':')
	b.WriteString(id)
	return b.String()
}

// KeyLen is the length of any key of n that WriteKey writes.
func KeyLen(prefix string, n Name) int {
	ruleLen := escapedLen(n.Rule)
	l := len(prefix) + len(Version) + 2 + DecimalLen(int64(ruleLen)) + 1 + ruleLen + 2 + escapedLen(n.Key) + 3
	if n.Group != "" {
		// 'g', the group's length, ':', the group and "}:"; the brace
		// after the key is then left out.
		groupLen := escapedLen(n.Group)
		l += 1 + DecimalLen(int64(groupLen)) + 1 + groupLen + 2 - 1
	}
	return l
}

// WriteKey writes the Redis key of n that ends in kind (a meter's letter,
// or another letter its caller gives a meaning; see RedisKeys). Inside a
// group the hash tag is the group's, 'g' and the escaped group name with
// its length, and the pair follows it:
//
//	<prefix>v1:{g<len>:<group>}:<len>:<rule>:<kind><key>:<letter>
//
// so every key of the group is in one slot; a tag outside a group starts
// with a digit, so the two never meet.
func WriteKey(b *strings.Builder, prefix string, n Name, kind byte) {
	var lenBuf [20]byte
	b.WriteString(prefix)
	b.WriteString(Version)
	b.WriteString(":{")
	if n.Group != "" {
		b.WriteByte('g')
		b.Write(strconv.AppendInt(lenBuf[:0], int64(escapedLen(n.Group)), 10))
		b.WriteByte(':')
		writeEscaped(b, n.Group)
		b.WriteString("}:")
	}
	b.Write(strconv.AppendInt(lenBuf[:0], int64(escapedLen(n.Rule)), 10))
	b.WriteByte(':')
	writeEscaped(b, n.Rule)
	b.WriteByte(':')
	if n.Hashed {
		b.WriteByte('#')
	} else {
		b.WriteByte('=')
	}
	writeEscaped(b, n.Key)
	if n.Group == "" {
		b.WriteByte('}')
	}
	b.WriteByte(':')
	b.WriteByte(kind)
}

// FleetKey returns the Redis key of the instances set, where the processes
// under prefix announce themselves:
//
//	<prefix>v1:{instances}
//
// Its hash tag is a constant, so on a Redis Cluster the whole fleet
// announces itself on one node; it starts with a letter other than 'g', so
// it never meets a pair's tag (which starts with a digit) or a group's.
func FleetKey(prefix string) string {
	return prefix + Version + ":{instances}"
}

// DecimalLen returns the length of n >= 0 in decimal, as a key or an
// argument writes it.
func DecimalLen(n int64) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}

func escapedLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		if s[i] == '%' || s[i] == '}' {
			n += 2
		}
	}
	return n
}

func writeEscaped(b *strings.Builder, s string) {
	for {
		i := strings.IndexAny(s, "%}")
		if i < 0 {
			b.WriteString(s)
			return
		}
		b.WriteString(s[:i])
		if s[i] == '%' {
			b.WriteString("%25")
		} else {
			b.WriteString("%7D")
		}
		s = s[i+1:]
	}
}
