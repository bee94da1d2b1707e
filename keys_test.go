package ratelimit

import (
	"strings"
	"testing"

	"github.com/ratelimit-go/ratelimit/internal/ladder"
)

func TestRedisKeysAreInjective(t *testing.T) {
	long := strings.Repeat("L", MaxKeyLength+1)
	pairs := [][2]string{
		{"x", "a:b"}, {"x:a", "b"}, {"x:", "ab"}, {"x", ":ab"},
		{"r", "}"}, {"r", "%7D"}, {"r", "%"}, {"r", "%25"},
		{"}", "k"}, {"%7D", "k"}, {"r", "{k}"}, {"r", "k\x00"}, {"r", "k"},
		{"1:r", "k"}, {"r", "=k"}, {"r", "#k"},
		{"r", long}, {"r", long + "x"},
	}
	seen := map[string][2]string{}
	for _, p := range pairs {
		k, err := localKey(p[0], p[1])
		if err != nil {
			t.Fatal(err)
		}
		keys := redisKeys("rl:", k)
		log, pen, counter := keys.Meter(algSliding.redis.letter()), keys.Penalty, keys.Meter(algCounter.redis.letter())
		if other, dup := seen[log]; dup {
			t.Errorf("rule %q key %q and rule %q key %q share the key %q", p[0], p[1], other[0], other[1], log)
		}
		seen[log] = p
		if !strings.HasSuffix(log, "}:l") || !strings.HasSuffix(pen, "}:p") || !strings.HasSuffix(counter, "}:c") ||
			log[:len(log)-1] != pen[:len(pen)-1] || log[:len(log)-1] != counter[:len(counter)-1] {
			t.Errorf("keys %q are not one set", keys)
		}
		if got := hashTag(log); strings.Contains(got, "}") || got != hashTag(pen) || got == "" {
			t.Errorf("hash tags %q and %q of %q", hashTag(log), hashTag(pen), log)
		}
	}
}

// hashTag returns what Redis Cluster hashes: the text between the first
// '{' and the first '}' after it.
func hashTag(key string) string {
	open := strings.IndexByte(key, '{')
	end := strings.IndexByte(key[open+1:], '}')
	return key[open+1 : open+1+end]
}

func TestRedisKeysLayout(t *testing.T) {
	for _, c := range []struct {
		rule, key, log string
	}{
		{"coupon:claim", "user-42", "rl:v1:{12:coupon:claim:=user-42}:l"},
		{"r}", "a%b", "rl:v1:{4:r%7D:=a%25b}:l"},
		{"r", strings.Repeat("k", MaxKeyLength), "rl:v1:{1:r:=" + strings.Repeat("k", MaxKeyLength) + "}:l"},
	} {
		k, _ := localKey(c.rule, c.key)
		if log := redisKeys("rl:", k).Meter(algSliding.redis.letter()); log != c.log {
			t.Errorf("rule %q key %q: log key %q, want %q", c.rule, c.key, log, c.log)
		}
	}
	// A pair of a group: the group's hash tag, the same keys as
	// AllowGroup's script gets (written one by one by pair.WriteKey).
	g := lkey{Rule: "m", Key: "u}", Group: "g%"}
	const pair = "rl:v1:{g4:g%25}:1:m:=u%7D:"
	var want []string // every kind's meter, in the registry's order, then the penalty state and the Reset's time
	for _, letter := range meterLetters + "pr" {
		want = append(want, pair+string(letter))
	}
	if !strings.HasPrefix(meterLetters, "lcgq") {
		t.Errorf("the meters' letters are %q, want the log's, the counter's, the bucket's and the quota's first", meterLetters)
	}
	ks := redisKeys("rl:", g)
	if got := append(ks.Meters, ks.Penalty, ks.Reset); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("a group pair's keys are %q, want %q", got, want)
	}
	if got := batchKey("rl:", g, "ID"); got != "rl:v1:{g4:g%25}:1:m:=u%7D:w:ID" {
		t.Errorf("a group pair's batch key is %q", got)
	}
	k, _ := localKey("r", strings.Repeat("k", MaxKeyLength+1))
	log := redisKeys("app:", k).Meter(algSliding.redis.letter())
	if !strings.HasPrefix(log, "app:v1:{1:r:#") || len(log) != len("app:v1:{1:r:#}:l")+64 {
		t.Errorf("a long key's log key is %q, want its SHA-256 in hex", log)
	}
}

func TestEncodeCallMatchesRedisKeys(t *testing.T) {
	k, _ := localKey("a%b}", "k{}")
	p := plan{meterFit: meterFit{rate: 7, window: 1_000_000}, alg: algSliding, penalize: true, penalty: ladder.Plan{WarnAfter: 1, BanAfter: 2, BanFor: 3, Memory: 4, Growth: 1.5, MaxBan: 9}}
	var keys [3]string
	var argv [callArgs]string
	hd := held{retry: 5, owed: 6, banLeft: 8, since: 3}
	ks, args := encodeCall(&keys, &argv, "rl:", k, &p, 1795344143891600, true, 2, "ID", 99, &hd, nil)
	want3 := redisKeys("rl:", k)
	if w := []string{want3.Meter(algSliding.redis.letter()), want3.Penalty, want3.Reset}; strings.Join(ks, "|") != strings.Join(w, "|") {
		t.Errorf("keys %q, want %q", ks, w)
	}
	want := []string{"1795344143891600", "1000000", "7", "2", "ID99", "5:6:8:3", "4", "1:2:3:1.5:9"}
	if strings.Join(args, "|") != strings.Join(want, "|") {
		t.Errorf("args %q, want %q", args, want)
	}
	p.penalize = false
	if ks, args := encodeCall(&keys, &argv, "rl:", k, &p, 0, false, 0, "ID", 1, &held{}, nil); len(ks) != 1 || strings.Join(args, "|") != "|1000000|7|0|ID1" { // no ARGV[6]: it would be "0", with nothing after it
		t.Errorf("args without a clock or penalty: %q", args)
	}
}

func TestCheckKeyPrefix(t *testing.T) {
	for _, prefix := range []string{"", "rl:", "app:rate:"} {
		if err := checkKeyPrefix(prefix); err != nil {
			t.Errorf("prefix %q: %v", prefix, err)
		}
	}
	for _, prefix := range []string{"{", "}", "a{b}:"} {
		if err := checkKeyPrefix(prefix); err == nil {
			t.Errorf("prefix %q accepted", prefix)
		}
	}
}
