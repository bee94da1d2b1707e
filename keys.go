package ratelimit

import (
	"fmt"
	"strings"

	"github.com/ratelimit-go/ratelimit/internal/pair"
)

// MaxKeyLength is the longest key kept as it is, in bytes. A longer key is
// replaced by its SHA-256 digest (in Redis and in the local limiter alike),
// which bounds memory and bandwidth; two different long keys share state only
// if their digests collide.
const MaxKeyLength = pair.MaxKeyLength

// DefaultKeyPrefix is the prefix of every Redis key when Options.KeyPrefix is
// empty.
const DefaultKeyPrefix = "rl:"

// lkey names the state of one (rule, key) pair, in the local store and in
// Redis (see pair.Name).
type lkey = pair.Name

// localKey checks key and names the state of (rule, key) (see
// pair.Name.Set, which a call uses in place).
func localKey(rule, key string) (lkey, error) {
	var k lkey
	if !k.Set(rule, key) {
		return k, emptyKey(rule)
	}
	return k, nil
}

// emptyKey is the error of an empty key for rule.
func emptyKey(rule string) error { return fmt.Errorf("%w: empty key for rule %q", ErrInvalidKey, rule) }

// pairKeys are the Redis keys of one (rule, key) pair, by what each holds;
// a kind's meter is under its letter (pair.Keys.Meter).
type pairKeys = pair.Keys

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
// state and the time of the last Reset (see pair.RedisKeys).
func redisKeys(prefix string, k lkey) pairKeys { return pair.RedisKeys(prefix, k, meterLetters) }

// batchKey returns the Redis key that remembers a write-back batch of k
// under id (see lua/writeback.lua), and recordKey the key of the record of
// what the reservation whose id is member took of k (see lua/allow.lua's
// Reserve).
func batchKey(prefix string, k lkey, id string) string { return pair.IDKey(prefix, k, 'w', id) }

func recordKey(prefix string, k lkey, member string) string {
	return pair.IDKey(prefix, k, 'v', member)
}

// checkKeyPrefix refuses a prefix with braces: they would make the prefix,
// not the (rule, key) pair, the Redis Cluster hash tag.
func checkKeyPrefix(prefix string) error {
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("%w: KeyPrefix %q contains a brace", ErrInvalidOptions, prefix)
	}
	return nil
}
