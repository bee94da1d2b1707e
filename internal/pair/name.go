// Package pair names the state of one (rule, key) pair: the Name a process
// keeps it under, and the names of its keys in Redis, which share one hash
// tag so that every key of a pair (or of a group's pairs) is in one Redis
// Cluster slot.
package pair

import (
	"crypto/sha256"
	"encoding/hex"
)

// MaxKeyLength is the longest key kept as it is, in bytes. A longer key is
// replaced by its SHA-256 digest (in Redis and in the process alike).
const MaxKeyLength = 256

// Name names the state of one (rule, key) pair. Keys longer than
// MaxKeyLength are replaced by their digest, marked by Hashed, so that a
// digest can never equal a short key.
//
// Its padding makes it 64 bytes, a multiple of 16: a call copies a name by
// value through an interface, and the copy of 56 bytes moves its last block
// over the one before it, so that the next copy's read of that block spans
// two writes and stalls the processor.
type Name struct {
	Rule   string
	Key    string
	Group  string // the group's tag (AllowGroup), "" outside a group
	Hashed bool
	_      [8]byte
}

// Set sets n to the name of (rule, key), and reports false for an empty
// key. It writes n in place: a name returned by value and then copied is
// read back, as a whole, before its halves are stored, which stalls the
// processor on every call.
func (n *Name) Set(rule, key string) bool {
	if key == "" || len(key) > MaxKeyLength {
		return n.setLong(rule, key)
	}
	n.Rule, n.Key, n.Group, n.Hashed = rule, key, "", false
	return true
}

// setLong is Set for an empty key or one longer than MaxKeyLength (its
// digest).
func (n *Name) setLong(rule, key string) bool {
	if key == "" {
		return false
	}
	sum := sha256.Sum256([]byte(key))
	n.Rule, n.Key, n.Group, n.Hashed = rule, hex.EncodeToString(sum[:]), "", true
	return true
}
