package ratelimit

import "strings"

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// slotsPerBreaker is how many consecutive slots share one circuit breaker on
// a Redis Cluster. A master owns whole ranges of slots, so a master that
// goes down opens the breakers of its ranges and leaves the others closed;
// only the few ranges that straddle two masters mix them.
const slotsPerBreaker = 64

// keySlot returns the Redis Cluster slot of key: CRC16 (XMODEM) of its hash
// tag, or of the whole key when it has none, modulo 16384.
func keySlot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if close := strings.IndexByte(key[open+1:], '}'); close > 0 {
			key = key[open+1 : open+1+close]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^key[i]]
	}
	return int(crc) % clusterSlots
}

var crc16Table = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()
