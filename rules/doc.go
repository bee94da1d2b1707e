// Package rules reads rate limit rules from a YAML file, checks them
// strictly, reloads the file while the program runs, and shows operators
// the rules in force.
//
// # The format
//
//	rules:
//	  - name: shop:coupon          # required, unique
//	    kind: sliding-log          # sliding-log (default) | approximate | gcra | calendar-quota | concurrency | fixed-window
//	    rate: 3                    # required
//	    window: 1m                 # sliding-log, approximate, gcra, concurrency, fixed-window (required there)
//	    dry_run: false
//	    degraded: local            # local | allow | deny (default: the limiter's)
//	    prefetch: 20ms             # hot keys decided in-process (default 0: off; not for concurrency)
//	    penalty:                   # optional
//	      warn_after: 2
//	      ban_after: 4
//	      ban_for: 5m
//	      memory: 1h
//	      ban_growth: 2
//	      max_ban_for: 24h
//	    overrides:                 # optional; each key at most once
//	      - key: tenant-gold
//	        rate: 30               # rate, window and burst may be overridden
//	  - name: api
//	    kind: gcra
//	    rate: 10
//	    window: 1s
//	    burst: 20                  # gcra only
//	  - name: daily
//	    kind: calendar-quota
//	    rate: 1000
//	    period: day                # calendar-quota only: day | week | month (required there)
//	    location: Europe/Berlin    # calendar-quota only (default UTC)
//
// Durations are Go durations (500ms, 1m, 24h). A concurrency rule's
// window is its leases' TTL (see ratelimit.Concurrency).
//
// # Strictness
//
// [Parse] and [Load] refuse an unknown field, a field twice, a duplicate
// rule name or override key, a value of the wrong type, a bad duration, a
// field the rule's kind does not take, an unknown kind, period or time
// zone, an empty file and an empty list of rules, each with an error
// wrapping [ErrInvalid] that names the file (for Load), the line and the
// rule. Every rule and every override then goes through
// [ratelimit.Rule.Validate], so a file accepts nothing the library would
// reject; those errors also wrap [ratelimit.ErrInvalidRule].
//
// # Overrides
//
// [Set.For] returns a rule with a key's override applied. An override
// keeps the rule's name, so a key's state is the same (name, key) pair
// under either limit, and a changed limit applies at once to the key's
// existing log. An override's key is the key as the adapter's key function
// writes it ("user:alice" for httplimit.User).
//
// # Reloads
//
// [Watch] loads a file and checks it every [WatchOptions].Interval (see
// [Watcher]): a file rewritten in place, replaced by a rename, or reached
// through symbolic links that are swapped (a Kubernetes ConfigMap) is
// reloaded; a version that fails to load, or lacks a rule
// [WatchOptions].Require names, is refused whole and reported to
// OnError, and the last good rules stay in force. A *Watcher is a
// policy.RuleSource: httplimit and grpclimit policies take their rules from
// it (Policy.Rules and Policy.RuleName), request by request, so a reload
// applies from the next request.
//
// # Inspection
//
// [Handler] is a read-only page, HTML and JSON, of the rules in force,
// where they came from, the Limiter's Stats and a key's state. Mount it on
// a mux of your own, behind your own authentication.
package rules
