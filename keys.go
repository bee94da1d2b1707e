package ratelimit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// MaxKeyLength is the longest key kept as it is, in bytes. A longer key is
// replaced by its SHA-256 digest (in Redis and in the local limiter alike),
// which bounds memory and bandwidth; two different long keys share state only
// if their digests collide.
const MaxKeyLength = 256

// DefaultKeyPrefix is the prefix of every Redis key when Options.KeyPrefix is
// empty.
const DefaultKeyPrefix = "rl:"

// layoutVersion names the format of the keys and of the values under them,
// so that a later format can roll out beside this one.
const layoutVersion = "v1"

// localKey checks key and names the state of (rule, key).
func localKey(rule, key string) (lkey, error) {
	var k lkey
	err := k.name(rule, key)
	return k, err
}

// name checks key and sets k to the name of the state of (rule, key), as
// localKey returns it. It writes k in place: a call's key returned by value
// and then copied is read back, as a whole, before its halves are stored,
// which stalls the processor on every call.
func (k *lkey) name(rule, key string) error {
	if key == "" || len(key) > MaxKeyLength {
		return k.nameLong(rule, key)
	}
	k.rule, k.key, k.group, k.hashed = rule, key, "", false
	return nil
}

// nameLong is name for an empty key (an error) or one longer than
// MaxKeyLength (its digest).
func (k *lkey) nameLong(rule, key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key for rule %q", ErrInvalidKey, rule)
	}
	sum := sha256.Sum256([]byte(key))
	k.rule, k.key, k.group, k.hashed = rule, hex.EncodeToString(sum[:]), "", true
	return nil
}

// pairKeys are the Redis keys of one (rule, key) pair, by what each holds.
type pairKeys struct {
	meters  []string // each kind's meter, in meterLetters' order
	penalty string   // the penalty state (see lua/penalty.lua)
	reset   string   // the time of the pair's last Reset (see lua/reset.lua)
}

// meter returns the key of a's meter.
func (ks pairKeys) meter(a *algorithm) string {
	return ks.meters[strings.IndexByte(meterLetters, a.redis.letter())]
}

// meterLetters are the last letters of the meters' keys, each once, in the
// registry's order (see algorithms): a kind that keeps its state in another
// kind's meter (the leases in the log) shares its letter.
var meterLetters = func() string {
	var b []byte
	for _, a := range algorithms {
		if !strings.ContainsRune(string(b), rune(a.redis.letter())) {
			b = append(b, a.redis.letter())
		}
	}
	return string(b)
}()

// redisKeys returns the Redis keys of k: each kind's meter, the penalty
// state and the time of the last Reset. Each is
//
//	<prefix>v1:{<len>:<rule>:<kind><key>}:<letter>
//
// where <len> is the length of the escaped rule name, <kind> is '=' for a
// key kept as it is and '#' for a digest, <letter> is the meter's (see
// meterLetters), 'p' or 'r', and '%' and '}' are escaped as %25 and %7D in
// the rule name and the key. The length makes the pair unambiguous (rule
// "x" key "a:b" differs from rule "x:a" key "b"); the escaping keeps the
// braces one hash tag, so all keys of a pair are in one Redis Cluster slot
// while different pairs spread over the slots. The strings share one
// allocation.
func redisKeys(prefix string, k lkey) pairKeys {
	one := keyLen(prefix, k)
	letters := meterLetters + "pr"
	var b strings.Builder
	b.Grow(len(letters) * one)
	for i := 0; i < len(letters); i++ {
		writeKey(&b, prefix, k, letters[i])
	}
	all := b.String()
	key := func(i int) string { return all[i*one : (i+1)*one] }
	ks := pairKeys{meters: make([]string, len(meterLetters)), penalty: key(len(meterLetters)), reset: key(len(meterLetters) + 1)}
	for i := range ks.meters {
		ks.meters[i] = key(i)
	}
	return ks
}

// batchKey returns the Redis key that remembers a write-back batch of k
// under id (see lua/writeback.lua), and recordKey the key of the record of
// what the reservation whose id is member took of k (see lua/allow.lua's
// Reserve): in the hash tag of k's other keys, so that one script may
// touch them all on a Redis Cluster.
func batchKey(prefix string, k lkey, id string) string { return idKey(prefix, k, 'w', id) }

func recordKey(prefix string, k lkey, member string) string { return idKey(prefix, k, 'v', member) }

// idKey returns the key of k that ends in kind (see writeKey), ':' and id.
func idKey(prefix string, k lkey, kind byte, id string) string {
	var b strings.Builder
	b.Grow(keyLen(prefix, k) + 1 + len(id))
	writeKey(&b, prefix, k, kind)
	b.WriteByte(':')
	b.WriteString(id)
	return b.String()
}

// keyLen is the length of either Redis key of k.
func keyLen(prefix string, k lkey) int {
	ruleLen := escapedLen(k.rule)
	n := len(prefix) + len(layoutVersion) + 2 + decimalLen(int64(ruleLen)) + 1 + ruleLen + 2 + escapedLen(k.key) + 3
	if k.group != "" {
		// 'g', the group's length, ':', the group and "}:"; the brace
		// after the key is then left out.
		groupLen := escapedLen(k.group)
		n += 1 + decimalLen(int64(groupLen)) + 1 + groupLen + 2 - 1
	}
	return n
}

// writeKey writes the Redis key of k that ends in kind (a meter's letter,
// 'p', 'r', 'v' or 'w'; see redisKeys, recordKey and batchKey).
// Inside a group the hash tag is the group's, 'g' and the escaped group
// name with its length, and the pair follows it:
//
//	<prefix>v1:{g<len>:<group>}:<len>:<rule>:<kind><key>:<letter>
//
// so every key of the group is in one slot; a tag outside a group starts
// with a digit, so the two never meet.
func writeKey(b *strings.Builder, prefix string, k lkey, kind byte) {
	var lenBuf [20]byte
	b.WriteString(prefix)
	b.WriteString(layoutVersion)
	b.WriteString(":{")
	if k.group != "" {
		b.WriteByte('g')
		b.Write(strconv.AppendInt(lenBuf[:0], int64(escapedLen(k.group)), 10))
		b.WriteByte(':')
		writeEscaped(b, k.group)
		b.WriteString("}:")
	}
	b.Write(strconv.AppendInt(lenBuf[:0], int64(escapedLen(k.rule)), 10))
	b.WriteByte(':')
	writeEscaped(b, k.rule)
	b.WriteByte(':')
	if k.hashed {
		b.WriteByte('#')
	} else {
		b.WriteByte('=')
	}
	writeEscaped(b, k.key)
	if k.group == "" {
		b.WriteByte('}')
	}
	b.WriteByte(':')
	b.WriteByte(kind)
}

func decimalLen(n int64) int {
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

// fleetKey returns the Redis key of the instances set, where the Limiters
// under prefix announce themselves (see fleet.go):
//
//	<prefix>v1:{instances}
//
// Its hash tag is a constant, so on a Redis Cluster the whole fleet
// announces itself on one node; it starts with a letter other than 'g', so
// it never meets a pair's tag (which starts with a digit) or a group's.
func fleetKey(prefix string) string {
	return prefix + layoutVersion + ":{instances}"
}

// checkKeyPrefix refuses a prefix with braces: they would make the prefix,
// not the (rule, key) pair, the Redis Cluster hash tag.
func checkKeyPrefix(prefix string) error {
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("%w: KeyPrefix %q contains a brace", ErrInvalidOptions, prefix)
	}
	return nil
}
